//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// servedLab is a lab with its counters written to a file, and serve
// running in its instance namespace.
type servedLab struct {
	l         *lab.Lab
	dir       string // bundles
	addr      string // serve's listen address, in the instance namespace
	cmd       *exec.Cmd
	stderr    *bytes.Buffer
	client    *http.Client // dials inside the instance namespace
	stopWrite context.CancelFunc
}

// startServedLab brings up a lab, writes its counters every 50 ms, and
// starts serve on its interface with extra flags.
func startServedLab(t *testing.T, extra ...string) *servedLab {
	t.Helper()
	return startServedLabWith(t, serveOptions{}, extra...)
}

// serveOptions change how startServedLabWith runs serve.
type serveOptions struct {
	// launch makes the command that runs serve with args in the lab's
	// instance namespace, dirs mounted at the same paths where it runs
	// apart (a container); nil: ip netns exec.
	launch func(l *lab.Lab, args []string, dirs []string) *exec.Cmd
	env    []string // added to serve's environment
	// beforeStart runs once the lab is up, before serve starts (a server
	// serve talks to), and returns more flags for serve.
	beforeStart func(l *lab.Lab) []string
}

func startServedLabWith(t *testing.T, o serveOptions, extra ...string) *servedLab {
	t.Helper()
	privtest.RequireRoot(t, "ip", "nft")
	ctx, cancel := context.WithCancel(context.Background())
	cfg := lab.DefaultConfig()
	cfg.OutBurst = 16 << 10 // a small credit bucket: a burst of 300 kB overflows it (as the micro-burst scenario)
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &servedLab{l: l, dir: t.TempDir(), stopWrite: cancel}
	if o.beforeStart != nil {
		extra = append(extra, o.beforeStart(l)...)
	}
	t.Cleanup(func() {
		cancel()
		if s.cmd != nil && s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
		l.Close()
	})
	tmp := t.TempDir()
	counters := filepath.Join(tmp, "counters.txt")
	if err := l.WriteCountersFile(counters); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = l.WriteCountersFile(counters)
			}
		}
	}()
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: l.DialInstance}}
	ready := filepath.Join(tmp, "ready")
	c := l.Config()
	args := append([]string{"serve", "-i", l.InstanceInterface(),
		"--counters-file", counters, "--no-imds", "--baseline", fmt.Sprintf("%dbit", c.OutRate),
		"--flow-limit", fmt.Sprintf("%dbit", c.FlowRate), "--sample-interval", "100ms",
		"--bundle-dir", s.dir, "--listen", "127.0.0.1:0", "--ready-file", ready}, extra...)
	if o.launch != nil {
		s.cmd = o.launch(l, args, []string{s.dir, tmp})
	} else {
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", l.InstanceNetns(), binary}, args...)...)
	}
	if o.env != nil {
		s.cmd.Env = append(os.Environ(), o.env...)
	}
	s.stderr = &bytes.Buffer{}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready, 60*time.Second)
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = strings.TrimSpace(string(b))
	return s
}

func (s *servedLab) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := s.client.Get("http://" + s.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, s.stderr)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop sends SIGTERM and wants exit 0.
func (s *servedLab) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, s.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit within 60 s of SIGTERM\n%s", s.stderr)
	}
}

// bundles lists the bundles in dir, oldest first.
func bundles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "enaprobe-*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prometheus is a real Prometheus server in the lab's instance namespace,
// scraping serve every second.
type prometheus struct {
	addr   string
	client *http.Client
}

func startPrometheus(t *testing.T, s *servedLab) *prometheus {
	t.Helper()
	privtest.RequireRoot(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: enaprobe
    static_configs:
      - targets: [%q]
`, s.addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, s)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("ip", "netns", "exec", s.l.InstanceNetns(), "prometheus",
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	p := &prometheus{addr: addr, client: s.client}
	waitFor(t, 60*time.Second, "prometheus ready", func() bool {
		resp, err := p.client.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// freePort finds a free loopback port in the instance namespace.
func freePort(t *testing.T, s *servedLab) int {
	t.Helper()
	var port int
	err := s.l.InInstance(func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// query runs an instant PromQL query and returns the value of each series
// by the given label's value.
func (p *prometheus) query(t *testing.T, q, label string) map[string]float64 {
	t.Helper()
	resp, err := p.client.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v (status %q)", q, err, out.Status)
	}
	vals := map[string]float64{}
	for _, r := range out.Data.Result {
		s, _ := r.Value[1].(string)
		v, _ := strconv.ParseFloat(s, 64)
		vals[r.Metric[label]] = v
	}
	return vals
}

// TestServePrometheus: serve in a lab, scraped by a real Prometheus: a
// burst over the lab's packets/s allowance shows as the counter's increase
// (the same the lab counted), link-local DNS traffic as a rate, the burst
// gives an incident bundle that analyze reads to the same findings, and
// SIGUSR1 and POST /snapshot write bundles on demand.
func TestServePrometheus(t *testing.T) {
	s := startServedLab(t, "--history", "5s", "--after", "2s", "--min-gap", "0")
	prom := startPrometheus(t, s)
	if code, body := s.get(t, "/healthz"); code != 200 {
		t.Fatalf("/healthz %d: %s", code, body)
	}
	// Two scrapes before the traffic, so the increase has its start.
	waitFor(t, 30*time.Second, "two scrapes of serve", func() bool {
		return prom.query(t, `count_over_time(up{job="enaprobe"}[1m])`, "job")["enaprobe"] >= 2
	})
	before, err := s.l.Counters().Read()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	llDone := make(chan lab.LinkLocalResult, 1)
	go func() {
		r, err := s.l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: 200, Duration: 6 * time.Second})
		if err != nil {
			t.Errorf("link-local: %v", err)
		}
		llDone <- r
	}()
	// 300 kB in one go: over the bandwidth allowance's credit.
	burst, err := s.l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("burst: %+v", burst.SendCounts)
	ll := <-llDone
	want := map[string]float64{}
	waitFor(t, 10*time.Second, "the burst exceeding an allowance of the lab", func() bool {
		after, err := s.l.Counters().Read()
		if err != nil {
			t.Fatal(err)
		}
		for name, label := range map[string]string{"pps_allowance_exceeded": "pps", "bw_out_allowance_exceeded": "bw_out"} {
			want[label] = float64(after[name] - before[name])
		}
		return want["pps"] > 0 || want["bw_out"] > 0
	})
	var got map[string]float64
	waitFor(t, 30*time.Second, "the burst's counter increase in Prometheus", func() bool {
		got = prom.query(t, `enaprobe_allowance_exceeded_total`, "allowance")
		return got["pps"] == want["pps"] && got["bw_out"] == want["bw_out"]
	})
	t.Logf("allowance counters in Prometheus %v, in the lab %v", got, want)
	inc := prom.query(t, `increase(enaprobe_allowance_exceeded_total[1m])`, "allowance")
	if inc["pps"]+inc["bw_out"] <= 0 {
		t.Errorf("increase(enaprobe_allowance_exceeded_total[1m]) = %v, want the burst's", inc)
	}
	t.Logf("increase over 1m in Prometheus: pps %.0f, bw_out %.0f", inc["pps"], inc["bw_out"])
	var rate map[string]float64
	waitFor(t, 30*time.Second, "the link-local rate in Prometheus", func() bool {
		rate = prom.query(t, `max_over_time(rate(enaprobe_linklocal_packets_total{service="dns"}[3s])[1m:1s])`, "service")
		return rate["dns"] > 0
	})
	// 200 requests/s, and their answers: a 3 s rate of 100 to 500
	// packets/s whatever the scrapes' phase.
	if r := rate["dns"]; r < 100 || r > 500 {
		t.Errorf("link-local dns rate %.0f packets/s, want 200 to 400 (%d requests sent)", r, ll.Sent)
	}
	t.Logf("link-local dns peak rate %.0f packets/s; %d requests sent, %d answered", rate["dns"], ll.Sent, ll.Answered)

	// The incident bundle, and analyze reading it to the same findings.
	waitFor(t, 30*time.Second, "an incident bundle", func() bool { return len(bundles(t, s.dir)) > 0 })
	incident := bundles(t, s.dir)[0]
	if !strings.Contains(filepath.Base(incident), s.l.InstanceInterface()) {
		t.Errorf("bundle %s is not named after the interface", incident)
	}
	checkSameFindings(t, incident)
	written := prom.query(t, `enaprobe_bundles_written_total`, "")
	waitFor(t, 10*time.Second, "bundles_written_total in Prometheus", func() bool {
		written = prom.query(t, `enaprobe_bundles_written_total`, "")
		return written[""] >= 1
	})

	// On demand: SIGUSR1, then POST /snapshot.
	n := len(bundles(t, s.dir))
	if err := s.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a bundle on SIGUSR1", func() bool { return len(bundles(t, s.dir)) > n })
	resp, err := s.client.Post("http://"+s.addr+"/snapshot", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /snapshot: %d %s", resp.StatusCode, body)
	}
	if _, err := os.Stat(strings.TrimSpace(string(body))); err != nil {
		t.Errorf("POST /snapshot answered %q: %v", body, err)
	}
	if code, _ := s.get(t, "/snapshot"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /snapshot: %d, want 405", code)
	}
	s.stop(t)
}

// bundleReport reads the report.json of a bundle.
func bundleReport(t *testing.T, bundle string) analyzer.Result {
	t.Helper()
	dir := t.TempDir()
	if err := exec.Command("tar", "-xzf", bundle, "-C", dir).Run(); err != nil {
		t.Fatal(err)
	}
	reports, _ := filepath.Glob(filepath.Join(dir, "*", "report.json"))
	if len(reports) != 1 {
		t.Fatalf("report.json in %s: %v", bundle, reports)
	}
	b, err := os.ReadFile(reports[0])
	if err != nil {
		t.Fatal(err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkSameFindings: analyze on a bundle serve wrote gives the findings of
// the bundle's own report.
func checkSameFindings(t *testing.T, bundle string) {
	t.Helper()
	again := analyzeBundle(t, bundle)
	orig := bundleReport(t, bundle)
	kinds := func(r analyzer.Result) []string {
		var k []string
		for _, f := range r.Findings {
			k = append(k, fmt.Sprintf("%s %s %.3f-%.3f", f.Kind, f.Interface, f.StartOffsetS, f.EndOffsetS))
		}
		return k
	}
	if !slices.Equal(kinds(orig), kinds(again)) {
		t.Errorf("analyze %s: findings %v, the bundle reported %v", bundle, kinds(again), kinds(orig))
	}
	if len(orig.Findings) == 0 {
		t.Errorf("the incident bundle %s has no finding", bundle)
	}
	t.Logf("bundle %s: findings %v", filepath.Base(bundle), kinds(orig))
}

// analyzeBundle runs `enaprobe analyze` on a bundle and returns its JSON.
func analyzeBundle(t *testing.T, bundle string) analyzer.Result {
	t.Helper()
	out, err := exec.Command(binary, "analyze", "--format", "json", bundle).Output()
	if err != nil {
		t.Fatalf("analyze %s: %v", bundle, err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}
