package analyzer

import (
	"math"
	"slices"
	"time"

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

// TestFlowAtCapThroughLossDips: a TCP flow at the cap that loses a packet
// to the cap's queue every 1.5 s falls to a tenth of the cap for 400 ms (a
// retransmission timeout) and sends its backlog at 1.5 times the cap for 100 ms
// after (under the instance's allowance), as the lab's upload does under
// its htb cap. Averaged per second it
// is not flat; the rate it holds most of each second is, and the finding
// comes, with the dips in its evidence.
func TestFlowAtCapThroughLossDips(t *testing.T) {
	c := synth.Cases()["flow_at_cap"]
	spec := c.Spec
	spec.Flows = slices.Clone(spec.Flows)
	i := slices.IndexFunc(spec.Flows, func(f synth.Flow) bool { return f.Dst.Port() == 5201 })
	if i < 0 {
		t.Fatal("no capped flow in the flow_at_cap case")
	}
	capped := spec.Flows[i]
	capBps := spec.FlowLimitBps * 0.995
	from, to := capped.Phases[0].From, capped.Phases[len(capped.Phases)-1].To
	capped.Phases = nil
	for at := from; at < to; {
		end := min(at+1000*time.Millisecond, to)
		capped.Phases = append(capped.Phases, synth.Phase{From: at, To: end, Bps: capBps})
		if end+500*time.Millisecond > to {
			capped.Phases[len(capped.Phases)-1].To = to
			break
		}
		capped.Phases = append(capped.Phases,
			synth.Phase{From: end, To: end + 400*time.Millisecond, Bps: capBps / 10},
			synth.Phase{From: end + 400*time.Millisecond, To: end + 500*time.Millisecond, Bps: 1.5 * capBps})
		at = end + 500*time.Millisecond
	}
	spec.Flows[i] = capped
	rec, _ := synth.Generate(spec)
	rec = roundTrip(t, rec)

	// The premise: per-second means vary past PlateauCV.
	opt := DefaultOptions()
	opt.FlowLimitBps = spec.FlowLimitBps
	a := newAnalysis(rec, opt)
	var means []float64
	for id := range a.flows.flows {
		f := &a.flows.flows[id]
		if f.key != capped.Key() {
			continue
		}
		for _, b := range a.rateBins(f) {
			var bytes uint64
			for k := b.first; k <= b.last; k++ {
				bytes += a.flows.deltas[f.deltas[k]].bytes
			}
			means = append(means, float64(bytes)*8e9/float64(b.toNs-b.fromNs))
		}
	}
	if cv := coefficientOfVariation(means[1 : len(means)-1]); cv <= opt.PlateauCV {
		t.Fatalf("premise: per-second means %v vary by CV %.3f, want over %.2f", means, cv, opt.PlateauCV)
	}

	res := Analyze(rec, opt)
	var found *Finding
	for k := range res.Findings {
		if f := &res.Findings[k]; f.Kind == KindFlowAtCap && f.Flows[0].Src == capped.Src.String() {
			found = f
		}
	}
	if found == nil {
		var kinds []string
		for _, f := range res.Findings {
			kinds = append(kinds, f.Kind+": "+f.Summary)
		}
		t.Fatalf("no flow_at_cap for %s; findings %q", capped.Src, kinds)
	}
	if d := found.EndOffsetS - found.StartOffsetS; d < 0.6*(to-from).Seconds() {
		t.Errorf("plateau %.2f s of the flow's %.2f s", d, (to - from).Seconds())
	}
	share := evidenceValue(t, *found, "time_at_plateau_rate_share")
	// 1 s of every 1.5 s at the rate.
	if share < 0.55 || share > 0.8 {
		t.Errorf("time_at_plateau_rate_share %.2f, want about 0.67", share)
	}
}

func coefficientOfVariation(xs []float64) float64 {
	var s, ss float64
	for _, x := range xs {
		s += x
		ss += x * x
	}
	n := float64(len(xs))
	m := s / n
	return math.Sqrt(max(ss/n-m*m, 0)) / m
}

func evidenceValue(t *testing.T, f Finding, name string) float64 {
	t.Helper()
	for _, e := range f.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("%s: no evidence %s in %+v", f.Kind, name, f.Evidence)
	return 0
}
