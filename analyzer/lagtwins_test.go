package analyzer

import (
	"fmt"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
)

// TestLagTwins: behind a refresh, a device whose refreshes come d earlier
// and whose lag is d longer shows every read the same values, as long as
// no drop falls between its refreshes and the other's. No analysis of the
// reads can tell the two apart, so the lag an incident states must hold
// both: its range no narrower than the reads allow. A short burst's twins
// span a refresh less its drops' span, which is why a burst shown at one
// change has its lag told to within that and no closer (docs/findings.md,
// "Reading the timing lines").
func TestLagTwins(t *testing.T) {
	for _, c := range twinCases() {
		for _, refresh := range []time.Duration{100 * time.Millisecond, time.Second} {
			for _, lag := range []time.Duration{30 * time.Millisecond, 250 * time.Millisecond, time.Second} {
				for _, given := range []bool{false, true} {
					if given && c.given == nil {
						continue
					}
					t.Run(fmt.Sprintf("%s/refresh=%v/lag=%v/given=%v", c.name, refresh, lag, given), func(t *testing.T) {
						s := c.spec()
						s.SampleNs, s.CounterLag, s.CounterRefresh = incSampleNs, lag, refresh
						s.RefreshPhase = refresh * 37 / 100
						rec, _ := synth.Generate(s)
						low, high := synth.TwinLags(s, MaxCounterLag)
						t.Logf("the same reads from devices lagging %v to %v", low.Round(100*time.Microsecond), high.Round(100*time.Microsecond))
						// Bursts sent again may pin the phase (four
						// behind 100 ms): no twins, and the range must
						// hold the lag.
						if (c.name == "bw" || c.name == "pps") && high-low <= 10*time.Millisecond {
							// The test's premise: drops shorter than a
							// refresh leave twins further apart than
							// twice the 5 ms a stated lag is judged by.
							t.Fatalf("twins only from %v to %v", low, high)
						}
						opt := DefaultOptions()
						if given {
							c.given(&opt)
						}
						res := Analyze(rec, opt)
						var inc *Incident
						for _, f := range res.Findings {
							if f.Kind == c.kind && f.Severity != SeverityInfo {
								inc = f.Incident
								break
							}
						}
						if inc == nil {
							t.Fatalf("no %s finding", c.kind)
						}
						if c.name == "bw-four" {
							checkFourBursts(t, res)
						}
						// Within a fine window at each end: the ranges are
						// made of windows.
						slack := time.Millisecond.Seconds()
						if inc.CounterLagLowS > low.Seconds()+slack || inc.CounterLagHighS < high.Seconds()-slack {
							t.Errorf("lag stated %.1f ms (%.1f to %.1f): devices lagging %v to %v show the same reads",
								inc.CounterLagS*1e3, inc.CounterLagLowS*1e3, inc.CounterLagHighS*1e3, low, high)
						}
					})
				}
			}
		}
	}
}

// twinCases are opaqueCases' short bursts, of bytes and of packets, and
// the burst of bytes four times, 730, 770 and 910 ms apart: behind a 1 s
// refresh the first two share a change and the others come a refresh
// apart, one cluster of changes with three causes. A long flood is shown
// at every refresh through it, and a connection flood moves
// conntrack_allowance_available with every SYN tracked, whose published
// values pin each refresh: they have no twins.
func twinCases() []opaqueCase {
	var out []opaqueCase
	for _, c := range opaqueCases() {
		if c.name != "bw" && c.name != "pps" {
			continue
		}
		out = append(out, c)
		switch c.name {
		case "bw":
			out = append(out, repeated(c, "bw-four", fourBursts, fourScale))
		case "pps":
			out = append(out, repeated(c, "pps-two", twoBursts, []float64{1, 1}))
		}
	}
	return out
}

// repeated is case c with its culprit's burst sent at each of at from its
// own start, at its rate times scale.
func repeated(c opaqueCase, name string, at []time.Duration, scale []float64) opaqueCase {
	c.name = name
	spec := c.spec
	c.spec = func() synth.Spec {
		s := spec()
		for i := range s.Flows {
			if f := &s.Flows[i]; f.Src.String() == c.culprit {
				burst := f.Phases[0]
				f.Phases = nil
				for k, d := range at {
					f.Phases = append(f.Phases, synth.Phase{From: burst.From + d, To: burst.To + d, Bps: burst.Bps * scale[k]})
				}
			}
		}
		return s
	}
	return c
}

// twoBursts are pps-two's: behind a 1 s lag the second lies within the
// longest lag before the first one's change, and the first more than the
// longest lag before it, so a device that showed every change at the next
// read would have shown the second burst there and never the first one.
var twoBursts = []time.Duration{0, 825 * time.Millisecond}

// fourBursts are bw-four's bursts, from opaqueCases' one, each at its
// rate times fourScale: the third the largest.
var (
	fourBursts = []time.Duration{-1500 * time.Millisecond, -770 * time.Millisecond, 0, 910 * time.Millisecond}
	fourScale  = []float64{1, 1, 1.2, 1}
)

// checkFourBursts: bw-four's findings above info each start within 5 ms of
// one of its bursts, and name three of them or more: the first two may be
// shown at one change, which one finding then holds.
func checkFourBursts(t *testing.T, res *Result) {
	t.Helper()
	var burstAt time.Duration
	c := opaqueCases()[0]
	for _, f := range c.spec().Flows {
		if f.Src.String() == c.culprit {
			burstAt = f.Phases[0].From
		}
	}
	named := map[time.Duration]bool{}
	for _, f := range res.Findings {
		if f.Severity == SeverityInfo {
			continue
		}
		start := time.Duration(f.StartOffsetS * float64(time.Second))
		ok := false
		for _, at := range fourBursts {
			if d := start - (burstAt + at); d > -5*time.Millisecond && d < 5*time.Millisecond {
				named[at], ok = true, true
			}
		}
		if !ok {
			t.Errorf("a finding starts at %v, at none of the bursts", start)
		}
	}
	if len(named) < 3 {
		t.Errorf("findings at %d of the 4 bursts", len(named))
	}
}
