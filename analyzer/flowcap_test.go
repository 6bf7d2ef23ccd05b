package analyzer

import (
	"testing"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestFlowPlateauUnknownLimit: with no per-flow limit known, the capped flow
// of the flow_at_cap recording is still reported, as info (flat at its own
// maximum), and the slower steady flows, flat too but under
// FlowPlateauMinBps, are not.
func TestFlowPlateauUnknownLimit(t *testing.T) {
	c := synth.Cases()["flow_at_cap"]
	rec, err := record.ReadFile(recordingPath("flow_at_cap"))
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions()
	opt.FlowLimitBps = 0
	res := Analyze(rec, opt)
	if res.Trace.Limits.FlowLimitBps.Known {
		t.Fatalf("flow limit %+v, want unknown", res.Trace.Limits.FlowLimitBps)
	}
	_, truth := synth.Generate(c.Spec)
	want := c.Expect(truth)[0]
	want.Severity = SeverityInfo
	checkExpected(t, res, want, float64(res.Trace.FineWindowUs)/1e6+1e-9)
	var n int
	for _, f := range res.Findings {
		if f.Kind == KindFlowAtCap {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d flow_at_cap findings, want 1", n)
	}
}
