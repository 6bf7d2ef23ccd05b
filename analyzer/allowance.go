package analyzer

import (
	"fmt"
	"time"

	"github.com/enaprobe/enaprobe/internal/units"
)

// learnAllowance estimates, with no allowance known, the rate above which
// an incident's counter moved: what passed over its span (offered, less
// what the counter says was dropped) per second, in the unit the
// allowance is given in. Its range is the same with the span one fine
// window shorter and longer at each end, where the located edges may be
// off. offered is the traffic per fine window, dropped turns the
// counter's rise into that unit, scale turns a value per second into the
// allowance's unit. It is nil for a span too short to tell (under 3
// windows) or when that range spans more than 30% of the value.
func (a *analysis) learnAllowance(inc incident, offered func(int) float64, dropped func(uint64) float64, scale float64, unit string) *LearnedAllowance {
	if inc.hi-inc.lo < 3 {
		return nil
	}
	sec := float64(a.g.widthNs) / 1e9
	rate := func(lo, hi int) float64 {
		lo, hi = max(lo, 0), min(hi, a.g.n)
		return passedPerWindow(offered, lo, hi, dropped(inc.delta)) * scale / sec
	}
	v := rate(inc.lo, inc.hi)
	low, high := v, v
	for _, r := range []float64{rate(inc.lo+1, inc.hi-1), rate(inc.lo-1, inc.hi+1), rate(inc.lo+1, inc.hi), rate(inc.lo, inc.hi-1)} {
		low, high = min(low, r), max(high, r)
	}
	if v <= 0 || high-low > 0.3*v {
		// Far more offered than passed (a short burst many times the
		// allowance): a window more or less of it swamps what passed.
		return nil
	}
	return &LearnedAllowance{Value: v, Unit: unit, Low: low, High: high}
}

// passedPerWindow is what passed of the traffic offered in [lo, hi) (val
// per window) where dropped of it did not, per window: about the
// allowance, over a stretch the counter kept moving through.
func passedPerWindow(offered func(int) float64, lo, hi int, dropped float64) float64 {
	if hi <= lo {
		return 0
	}
	return max(sumIn(offered, lo, hi)-dropped, 0) / float64(hi-lo)
}

// learnedText says what the run taught of the allowance and how to give it
// next time: "drops began above about 8.1 kpps (7.6 to 8.6 kpps): give
// --pps-allowance 8100 next time".
func learnedText(l *LearnedAllowance, flag string, flagValue string) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("; drops began above about %s (%s to %s): give %s %s next time", allowanceRate(l.Value, l.Unit),
		allowanceRate(l.Low, l.Unit), allowanceRate(l.High, l.Unit), flag, flagValue)
}

// passedWhileMoving is, for incidents of one counter found with no
// allowance known, the rate that passed (per second, offered less the
// counter's rise) over the longest run of them at most IncidentRefill
// apart, when that run lasts 100 ms or more: the counter kept moving
// through it, so the traffic was over the allowance, and what passed is
// about the allowance. 0 when there is no such run.
func (a *analysis) passedWhileMoving(incs []incident, offered func(int) float64) float64 {
	gap := a.refillWindows()
	best, bestLo, bestHi := 0, 0, 0
	for f := 0; f < len(incs); {
		l := f
		for l+1 < len(incs) && incs[l+1].lo-incs[l].hi <= gap {
			l++
		}
		if w := incs[l].hi - incs[f].lo; w > best {
			best, bestLo, bestHi = w, f, l
		}
		f = l + 1
	}
	if best == 0 || int64(best)*a.g.widthNs < int64(100*time.Millisecond) {
		return 0
	}
	var rise uint64
	for _, inc := range incs[bestLo : bestHi+1] {
		rise += inc.delta
	}
	lo, hi := incs[bestLo].lo, incs[bestHi].hi
	passed := sumIn(offered, lo, hi) - float64(rise)
	return max(passed, 0) / (float64(hi-lo) * float64(a.g.widthNs) / 1e9)
}

// allowanceRate writes a learned allowance in its unit: bit/s or packets/s.
func allowanceRate(v float64, unit string) string {
	if unit == "bps" {
		return units.BitRate(v)
	}
	return units.PacketRate(v)
}
