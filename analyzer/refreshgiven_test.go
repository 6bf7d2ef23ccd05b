package analyzer

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
)

// TestCounterRefreshGiven: two 300 kB bursts a second apart (the lab's
// micro-burst), no allowance known, behind a 100 ms refresh and every lag.
// Their counter changes twice, a second apart, which tells no refresh the
// bursts' rhythm does not: learned, the refresh is not told, and every
// lag's range starts at 0 (0 to 285 ms where it was 250 behind 100 ms; 0
// to 35 where it was 30 with no refresh). Given (--counter-refresh), it is
// stated as given, and the lag's range, a refresh and a read wide at
// most, holds the device's (178 to 285 ms; 28 to 35); given as 0, the
// lag is stated within 5 ms.
func TestCounterRefreshGiven(t *testing.T) {
	ms := time.Millisecond
	for _, refresh := range []time.Duration{0, 100 * ms} {
		for _, lag := range opaqueLags {
			t.Run(fmt.Sprintf("refresh=%v/lag=%v", refresh, lag), func(t *testing.T) {
				first := egressBurst(17, 9, 1472, 1300*ms+300*time.Microsecond, 2*ms, 300e3)
				second := egressBurst(17, 9, 1472, 2303*ms+300*time.Microsecond, 2*ms, 300e3)
				second.Src = netip.AddrPortFrom(second.Src.Addr(), 41001)
				spec := synth.Spec{Name: "refresh-given", Duration: 4 * time.Second, Seed: 61, SampleNs: incSampleNs,
					CounterLag: lag, CounterRefresh: refresh, RefreshPhase: refresh * 37 / 100,
					Interfaces: []synth.Interface{{Name: "eth0", ENA: true, BaselineBps: 40e6, BurstBps: 40e6, BucketBytes: 64 << 10}},
					Flows:      []synth.Flow{first, second}}
				rec, _ := synth.Generate(spec)
				opt := DefaultOptions()
				opt.CounterRefresh = refresh
				if refresh == 0 {
					opt.CounterRefresh = RefreshEveryRead
				}
				res := Analyze(rec, opt)
				found := aboveInfo(res, KindMicroburstOut)
				if len(found) != 2 {
					t.Fatalf("%d microburst_out findings above info, want the two bursts'", len(found))
				}
				for _, f := range found {
					inc := f.Incident
					if !inc.CounterRefreshKnown || !inc.CounterRefreshGiven || math.Abs(inc.CounterRefreshS-refresh.Seconds()) > 1e-9 {
						t.Errorf("refresh stated %v s (known %v, given %v), want %v given", inc.CounterRefreshS, inc.CounterRefreshKnown, inc.CounterRefreshGiven, refresh)
					}
					if want := "(given)"; !strings.Contains(f.Summary, want) {
						t.Errorf("summary %q: want the refresh said to be given", f.Summary)
					}
					checkTimingStated(t, inc, refresh, lag)
					if w := inc.CounterLagHighS - inc.CounterLagLowS; w > refresh.Seconds()+0.015 {
						t.Errorf("lag range %.4f to %.4f s: wider than the refresh and a read", inc.CounterLagLowS, inc.CounterLagHighS)
					}
				}
			})
		}
	}
}

// TestCounterRefreshGivenWithLag: a lag and a refresh both given
// (--counter-lag 250ms --counter-refresh 100ms): the look-back reaches a
// refresh past the lag, both are said to be given, and the bursts, shown
// up to 100 ms after their lag, are each found.
func TestCounterRefreshGivenWithLag(t *testing.T) {
	ms := time.Millisecond
	first := egressBurst(17, 9, 1472, 1300*ms+300*time.Microsecond, 2*ms, 300e3)
	second := egressBurst(17, 9, 1472, 2303*ms+300*time.Microsecond, 2*ms, 300e3)
	second.Src = netip.AddrPortFrom(second.Src.Addr(), 41001)
	spec := synth.Spec{Name: "refresh-lag-given", Duration: 4 * time.Second, Seed: 61, SampleNs: incSampleNs,
		CounterLag: 250 * ms, CounterRefresh: 100 * ms, RefreshPhase: 37 * ms,
		Interfaces: []synth.Interface{{Name: "eth0", ENA: true, BaselineBps: 40e6, BurstBps: 40e6, BucketBytes: 64 << 10}},
		Flows:      []synth.Flow{first, second}}
	rec, _ := synth.Generate(spec)
	opt := DefaultOptions()
	opt.CounterLag, opt.CounterRefresh = 250*ms, 100*ms
	found := aboveInfo(Analyze(rec, opt), KindMicroburstOut)
	if len(found) != 2 {
		t.Fatalf("%d microburst_out findings above info, want the two bursts'", len(found))
	}
	for k, f := range found {
		inc := f.Incident
		if inc.LookBackS < 0.35 || !inc.CounterRefreshGiven || !strings.Contains(f.Summary, "refreshed every 100 ms (given); drops shown 250 ms after the traffic (given)") {
			t.Errorf("finding %d: look-back %.3f s, refresh given %v, %q: want 350 ms or more, both given", k, inc.LookBackS, inc.CounterRefreshGiven, f.Summary)
		}
	}
}
