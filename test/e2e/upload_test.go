//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/s3gw"
)

// burstOverAllowance sends the burst TestServePrometheus sends: 300 kB at
// once, over the lab's bandwidth credit, so an incident bundle follows.
func burstOverAllowance(t *testing.T, s *servedLab) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := s.l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200}); err != nil {
		t.Fatal(err)
	}
}

// metricValue reads one sample of /metrics by its whole series name; -1
// when absent.
func metricValue(t *testing.T, s *servedLab, series string) float64 {
	t.Helper()
	_, body := s.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestServeUploads: an incident in the lab ends as an object in a real S3
// server (versitygw in the lab's instance namespace), uploaded by serve
// through the AWS SDK with credentials from the SDK's default chain (the
// environment here, a role on EC2), under PREFIX/CLUSTER/NODE. The object
// analyzes to the bundle's findings, and the uploads are counted.
func TestServeUploads(t *testing.T) {
	var gw *s3gw.Server
	s := startServedLabWith(t, serveOptions{
		env: s3gw.Env(),
		beforeStart: func(l *lab.Lab) []string {
			gw = s3gw.StartIn(t, "incidents", s3gw.Netns{Name: l.InstanceNetns(), Do: l.InInstance, Dial: l.DialInstance})
			return []string{"--upload", "s3://incidents/enaprobe", "--upload-endpoint", gw.Endpoint,
				"--cluster-name", "lab-cluster", "--node-name", "node-1"}
		},
	}, "--history", "5s", "--after", "2s", "--min-gap", "0")
	if v := metricValue(t, s, `enaprobe_bundle_uploads_total{result="uploaded"}`); v != 0 {
		t.Errorf("uploads before any bundle: %v, want the series at 0 from the first scrape", v)
	}
	burstOverAllowance(t, s)
	waitFor(t, 30*time.Second, "an incident bundle", func() bool { return len(bundles(t, s.dir)) > 0 })
	local := bundles(t, s.dir)[0]
	key := "enaprobe/lab-cluster/node-1/" + filepath.Base(local)
	waitFor(t, 30*time.Second, "the bundle's object in the bucket", func() bool {
		return slices.Contains(gw.Keys(t, "incidents", "enaprobe/"), key)
	})
	fetched := gw.Fetch(t, "incidents", key, t.TempDir())
	want, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(fetched); err != nil || string(got) != string(want) {
		t.Fatalf("object %s: %d bytes (%v), the local bundle %d", key, len(got), err, len(want))
	}
	checkSameFindings(t, fetched)
	waitFor(t, 10*time.Second, "the upload counted", func() bool {
		return metricValue(t, s, `enaprobe_bundle_uploads_total{result="uploaded"}`) >= 1
	})
	if code, body := s.get(t, "/healthz"); code != 200 || strings.Contains(body, "upload:") {
		t.Errorf("/healthz %d %q after a good upload", code, body)
	}
	s.stop(t)
}

// TestServeUploadUnreachable: with the bucket's endpoint unreachable the
// upload is retried and counted, /healthz says why (still 200: the probe
// is fine), and the bundle stays on disk whatever --max-bundles says.
func TestServeUploadUnreachable(t *testing.T) {
	s := startServedLabWith(t, serveOptions{
		env: s3gw.Env(),
		beforeStart: func(l *lab.Lab) []string {
			var closed string
			if err := l.InInstance(func() error { closed = s3gw.ClosedEndpoint(t); return nil }); err != nil {
				t.Fatal(err)
			}
			return []string{"--upload", "s3://incidents/enaprobe", "--upload-endpoint", closed}
		},
	}, "--history", "5s", "--after", "1s", "--min-gap", "0", "--max-bundles", "1")
	burstOverAllowance(t, s)
	waitFor(t, 30*time.Second, "an incident bundle", func() bool { return len(bundles(t, s.dir)) > 0 })
	waitFor(t, 30*time.Second, "a retried upload counted", func() bool {
		return metricValue(t, s, `enaprobe_bundle_uploads_total{result="retried"}`) >= 1
	})
	code, body := s.get(t, "/healthz")
	if code != 200 || !strings.Contains(body, "upload: last attempt failed") {
		t.Errorf("/healthz %d %q, want 200 with the upload's last error", code, body)
	}
	// Two snapshots over --max-bundles 1: the incident bundle waits for its
	// upload, so the budget leaves it.
	first := bundles(t, s.dir)[0]
	for range 2 {
		resp, err := s.client.Post("http://"+s.addr+"/snapshot", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, err := os.Stat(first); err != nil {
		t.Errorf("the bundle waiting for its upload was removed: %v", err)
	}
	if v := metricValue(t, s, `enaprobe_bundle_uploads_total{result="uploaded"}`); v != 0 {
		t.Errorf("uploaded %v to a closed port", v)
	}
	s.stop(t)
}

// TestTraceToS3: a one-off `-o s3://` (here of `lab run`, a trace in the
// lab) uploads its bundle, which analyzes to the report it printed, and
// leaves no local copy behind.
func TestTraceToS3(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft")
	gw := s3gw.Start(t, "tickets")
	tmp := t.TempDir()
	cmd := exec.Command(binary, "lab", "run", "clean", "--format", "json", "-o", "s3://tickets/support",
		"--upload-endpoint", gw.Endpoint, "--cluster-name", "lab", "--node-name", "laptop")
	cmd.Env = append(append(os.Environ(), s3gw.Env()...), "TMPDIR="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lab run -o s3://: %v\n%s", err, stderr.String())
	}
	keys := gw.Keys(t, "tickets", "support/lab/laptop/")
	if len(keys) != 1 || !strings.HasSuffix(keys[0], ".tar.gz") {
		t.Fatalf("objects %v, want one bundle under support/lab/laptop/", keys)
	}
	var printed analyzer.Result
	if err := json.Unmarshal(out, &printed); err != nil {
		t.Fatal(err)
	}
	again := analyzeBundle(t, gw.Fetch(t, "tickets", keys[0], t.TempDir()))
	if len(again.Findings) != len(printed.Findings) || len(again.Profile.Rates) == 0 || !reflect.DeepEqual(again.Profile.Rates, printed.Profile.Rates) {
		t.Errorf("the uploaded bundle analyzes to %d findings, rates %+v; the trace printed %d, %+v",
			len(again.Findings), again.Profile.Rates, len(printed.Findings), printed.Profile.Rates)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "enaprobe-*.tar.gz")); len(left) > 0 {
		t.Errorf("local copies left after the upload: %v", left)
	}
}
