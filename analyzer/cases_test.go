package analyzer

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

// counterKinds are the findings that rest on an allowance counter.
var counterKinds = []string{KindMicroburstIn, KindMicroburstOut, KindPPSExceeded, KindConntrackExceeded,
	KindConntrackNearLimit, KindLinkLocalExceeded, KindBaselineExhausted}

// TestCases analyses every recording of testdata and checks the findings
// against the truth of the scenario that generated it.
func TestCases(t *testing.T) {
	cases := synth.Cases()
	for _, name := range sortedNames(cases) {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec, err := record.ReadFile(recordingPath(name))
			if err != nil {
				t.Fatal(err)
			}
			res := Analyze(rec, DefaultOptions())
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatalf("result does not encode: %v", err)
			}
			// Empty lists are [], never null, for the JSON Schema.
			if i := bytes.Index(b, []byte("null")); i >= 0 {
				t.Errorf("null in the JSON result: ...%s...", b[max(i-80, 0):min(i+20, len(b))])
			}
			checkCase(t, c, res)
			if t.Failed() {
				for _, f := range res.Findings {
					t.Logf("%s %s %s [%.4f, %.4f) %s", f.Kind, f.Severity, f.Interface, f.StartOffsetS, f.EndOffsetS, f.Summary)
				}
			}
		})
	}
}

func checkCase(t *testing.T, c synth.Case, res *Result) {
	t.Helper()
	// One fine window, and a nanosecond for the float arithmetic of offsets.
	window := float64(res.Trace.FineWindowUs)/1e6 + 1e-9
	if c.Expect != nil {
		_, truth := synth.Generate(c.Spec)
		for _, want := range c.Expect(truth) {
			checkExpected(t, res, want, window)
		}
	}
	if c.NoFindings && len(res.Findings) > 0 {
		t.Errorf("%d findings for traffic under every limit, want none", len(res.Findings))
	}
	for _, f := range res.Findings {
		checkAgrees(t, f)
		if c.MaxSeverity != "" && severityRank(f.Severity) > severityRank(c.MaxSeverity) {
			t.Errorf("finding %s of severity %s, at most %s expected: %s", f.Kind, f.Severity, c.MaxSeverity, f.Summary)
		}
		if forbidden(c.Forbid, f) {
			t.Errorf("forbidden finding %s (%s): %s", f.Kind, f.Severity, f.Summary)
		}
		if slices.Contains(c.NoCounterFindingsOn, f.Interface) && slices.Contains(counterKinds, f.Kind) {
			t.Errorf("counter-based finding %s on %s, which has no counters: %s", f.Kind, f.Interface, f.Summary)
		}
	}
	for _, iface := range c.NoCounterFindingsOn {
		checkAnalysedWithoutCounters(t, res, iface)
	}
	if len(res.Loss.Resets) < c.WantResets {
		t.Errorf("loss lists %d counter resets, want at least %d", len(res.Loss.Resets), c.WantResets)
	}
	if res.Loss.CounterReadFailures < c.WantReadFailures {
		t.Errorf("loss counts %d failed reads, want at least %d", res.Loss.CounterReadFailures, c.WantReadFailures)
	}
}

// forbidden tells whether a finding matches one of the "kind" or
// "kind:severity" (that severity or above) entries.
func forbidden(list []string, f Finding) bool {
	for _, e := range list {
		kind, sev, hasSev := strings.Cut(e, ":")
		if kind == f.Kind && (!hasSev || severityRank(f.Severity) >= severityRank(sev)) {
			return true
		}
	}
	return false
}

// checkExpected finds the expected finding: same kind, interface and
// severity, its window within one fine window of the truth, and the
// expected top culprit.
func checkExpected(t *testing.T, res *Result, want synth.Expect, window float64) {
	t.Helper()
	from, to := want.From.Seconds(), want.To.Seconds()
	var near []Finding
	for _, f := range res.Findings {
		if f.Kind == want.Kind && f.Interface == want.Interface {
			near = append(near, f)
		}
	}
	if want.Severity != SeverityInfo {
		var n int
		for _, f := range near {
			if f.Severity == want.Severity {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d %s findings of severity %s on %s, want one", n, want.Kind, want.Severity, want.Interface)
		}
	}
	for _, f := range near {
		if math.Abs(f.StartOffsetS-from) > window || math.Abs(f.EndOffsetS-to) > window {
			continue
		}
		if f.Severity != want.Severity {
			t.Errorf("%s [%.4f, %.4f): severity %s, want %s", f.Kind, f.StartOffsetS, f.EndOffsetS, f.Severity, want.Severity)
		}
		if len(f.Flows) == 0 {
			t.Errorf("%s [%.4f, %.4f): no culprit flow, want %s -> %s", f.Kind, f.StartOffsetS, f.EndOffsetS, want.Src, want.Dst)
			return
		}
		if top := f.Flows[0]; top.Src != want.Src || top.Dst != want.Dst {
			t.Errorf("%s [%.4f, %.4f): top flow %s -> %s, want %s -> %s", f.Kind, f.StartOffsetS, f.EndOffsetS, top.Src, top.Dst, want.Src, want.Dst)
		}
		if want.Source != "" && f.Flows[0].Source != want.Source {
			t.Errorf("%s: top flow from %s, want %s", f.Kind, f.Flows[0].Source, want.Source)
		}
		return
	}
	t.Errorf("no %s finding on %s within %.4f s of [%.4f, %.4f); %d of that kind", want.Kind, want.Interface, window, from, to, len(near))
	for _, f := range near {
		t.Logf("  got [%.4f, %.4f) %s", f.StartOffsetS, f.EndOffsetS, f.Summary)
	}
}

// checkAnalysedWithoutCounters: the interface is reported as having no
// allowance counters, and its traffic is still profiled.
func checkAnalysedWithoutCounters(t *testing.T, res *Result, iface string) {
	t.Helper()
	var found bool
	for _, e := range res.Trace.ENA {
		if e.Interface == iface {
			found = true
			if e.ENA || len(e.Present) != 0 || len(e.Absent) != len(allowanceCounters) {
				t.Errorf("%s: ENA %v, present %v, absent %v; want no allowance counter", iface, e.ENA, e.Present, e.Absent)
			}
		}
	}
	if !found {
		t.Errorf("%s missing from trace.ena", iface)
	}
	var profiled bool
	for _, r := range res.Profile.Rates {
		profiled = profiled || (r.Interface == iface && r.MeanBps > 0)
	}
	if !profiled {
		t.Errorf("%s: no rate profile", iface)
	}
}

// checkAgrees: the SYN counts of a conntrack finding's evidence and its
// SYN sources come from one window and add up (issue 14: "0 SYNs seen"
// beside a flows table of 50).
func checkAgrees(t *testing.T, f Finding) {
	t.Helper()
	if f.Kind != KindConntrackExceeded {
		return
	}
	ev := map[string]float64{}
	for _, e := range f.Evidence {
		ev[e.Name] = e.Value
	}
	var syns, retried float64
	for _, fl := range f.Flows {
		syns += float64(fl.SYNs)
		retried += float64(fl.SYNsRetried)
	}
	if ev["syns"] != ev["syns_first"]+ev["syns_retried"] || syns > ev["syns"] || retried > ev["syns_retried"] ||
		(len(f.Flows) < DefaultOptions().TopFlows && (syns != ev["syns"] || retried != ev["syns_retried"])) {
		t.Errorf("%s: evidence %v SYNs (%v first, %v retried), its sources %v (%v retried)", f.Kind,
			ev["syns"], ev["syns_first"], ev["syns_retried"], syns, retried)
	}
	if ev["syns"] == 0 || len(f.Flows) == 0 {
		t.Errorf("%s: %v SYNs, %d sources: nothing to say who filled the table", f.Kind, ev["syns"], len(f.Flows))
	}
}
