//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/privtest"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/lab"
	"github.com/enaprobe/enaprobe/record"
	"github.com/enaprobe/enaprobe/report"
	"github.com/enaprobe/enaprobe/scenario"
	"github.com/enaprobe/enaprobe/schema"
)

// labRun runs `enaprobe lab run NAME` and returns its JSON report, the
// scenario's truth, and the recording from the bundle.
func labRun(t *testing.T, name string, extra ...string) (*analyzer.Result, scenario.Truth, *record.Recording) {
	t.Helper()
	privtest.RequireRoot(t)
	dir := t.TempDir()
	bundle, truthFile := filepath.Join(dir, "bundle"), filepath.Join(dir, "truth.json")
	args := append([]string{"lab", "run", name, "--format", "json", "-o", bundle, "--truth-file", truthFile}, extra...)
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("enaprobe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := validateReport(stdout.Bytes()); err != nil {
		t.Fatalf("report.json does not validate: %v", err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	var truth scenario.Truth
	b, err := os.ReadFile(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatal(err)
	}
	rec, _, err := report.ReadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stderr:\n%s", stderr.String())
	checkReanalysis(t, bundle, &res)
	return &res, truth, rec
}

// validateReport checks a JSON report against schema/report.schema.json.
func validateReport(doc []byte) error {
	sch, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.ReportJSON))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ReportID, sch); err != nil {
		return err
	}
	compiled, err := c.Compile(schema.ReportID)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return compiled.Validate(v)
}

func findingsOf(res *analyzer.Result, kind string) []analyzer.Finding {
	var out []analyzer.Finding
	for _, f := range res.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// mustFind is findingsOf, failing the test at once when there is none.
func mustFind(t *testing.T, res *analyzer.Result, kind string) []analyzer.Finding {
	t.Helper()
	fs := findingsOf(res, kind)
	if len(fs) == 0 {
		t.Fatalf("no %s finding", kind)
	}
	return fs
}

func logFindings(t *testing.T, res *analyzer.Result) {
	t.Helper()
	for _, f := range res.Findings {
		top := ""
		if len(f.Flows) > 0 {
			top = f.Flows[0].Src + " -> " + f.Flows[0].Dst
		}
		t.Logf("%s %s %.4f-%.4f s: %s [top %s]", f.Severity, f.Kind, f.StartOffsetS, f.EndOffsetS, f.Summary, top)
	}
}

func TestScenarioMicroBurst(t *testing.T) {
	res, truth, rec := labRun(t, "micro-burst")
	logFindings(t, res)
	bursts := findingsOf(res, analyzer.KindMicroburstOut)
	if len(truth.Bursts) == 0 {
		t.Fatal("the scenario sent no burst")
	}
	const slack = 2 * time.Millisecond
	for i, b := range truth.Bursts {
		from := time.Duration(b.StartNs - rec.Meta.Start.MonoNs).Seconds()
		to := time.Duration(b.EndNs - rec.Meta.Start.MonoNs).Seconds()
		var hit *analyzer.Finding
		for j := range bursts {
			f := &bursts[j]
			if f.StartOffsetS <= from+slack.Seconds() && f.EndOffsetS >= to-slack.Seconds() &&
				f.StartOffsetS >= from-slack.Seconds()-0.002 && f.EndOffsetS <= to+slack.Seconds()+0.002 {
				hit = f
			}
		}
		if hit == nil {
			t.Errorf("burst %d at %.4f-%.4f s: no microburst_out finding covering it within %v", i, from, to, slack)
			continue
		}
		if len(hit.Flows) == 0 || hit.Flows[0].Src != b.Src.String() {
			t.Errorf("burst %d: top flow %+v, want source %s", i, hit.Flows, b.Src)
		}
	}
}

func TestScenarioFlowAtCap(t *testing.T) {
	res, _, _ := labRun(t, "flow-at-cap")
	logFindings(t, res)
	caps := mustFind(t, res, analyzer.KindFlowAtCap)
	f := caps[0].Flows
	if len(f) == 0 || !strings.HasPrefix(f[0].Src, lab.InstanceAddr.String()+":") || !strings.HasSuffix(f[0].Dst, ":5001") {
		t.Errorf("flow_at_cap flows %+v, want the upload to :%d", f, lab.BulkPort)
	}
	for _, c := range res.Counters {
		if c.Kind == "counter" && c.Delta != 0 {
			t.Errorf("counter %s moved by %d: the per-flow cap must move none", c.Name, c.Delta)
		}
	}
}

func TestScenarioLinkLocal(t *testing.T) {
	res, truth, _ := labRun(t, "link-local")
	logFindings(t, res)
	ll := mustFind(t, res, analyzer.KindLinkLocalExceeded)
	if f := ll[0].Flows; len(f) == 0 || f[0].Src != truth.Culprit.String() {
		t.Errorf("linklocal_exceeded flows %+v, want the DNS client %s first", f, truth.Culprit)
	}
}

func TestScenarioConnectionFlood(t *testing.T) {
	res, _, _ := labRun(t, "connection-flood")
	logFindings(t, res)
	ct := mustFind(t, res, analyzer.KindConntrackExceeded)
	src := ct[0].Flows
	if len(src) == 0 {
		t.Fatal("conntrack_exceeded names no source")
	}
	ap, err := netip.ParseAddrPort(strings.Replace(src[0].Src, ":*", ":0", 1))
	if err != nil || ap.Addr() != lab.InstanceAddr {
		t.Errorf("conntrack_exceeded source %q, want the instance %s", src[0].Src, lab.InstanceAddr)
	}
}

func TestScenarioClean(t *testing.T) {
	res, _, _ := labRun(t, "clean")
	logFindings(t, res)
	for _, f := range res.Findings {
		if f.Severity != analyzer.SeverityInfo {
			t.Errorf("clean traffic gave %s %s: %s", f.Severity, f.Kind, f.Summary)
		}
	}
	var packets uint64
	for _, tt := range res.Totals {
		packets += tt.Packets
	}
	if packets == 0 {
		t.Error("the clean scenario traced no packet")
	}
}
