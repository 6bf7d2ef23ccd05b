package synth

import (
	"maps"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TwinLags are the least and most counter lag of devices whose reads of
// spec s's trace are every one the same as s's device's: the device's
// refreshes moved earlier by what its lag is longer, or later by what it
// is shorter, as long as no drop falls between the two devices' refreshes.
// Nothing in a recording tells such twins apart, so a lag stated from it
// must hold them all. Bisected to a millisecond, within 0 and maxLag (a
// device a whole refresh off shows every drop a refresh later: no twin).
// With no refresh it is not searched, and s's own lag is returned: twins
// there lie within a read interval of it.
func TwinLags(s Spec, maxLag time.Duration) (low, high time.Duration) {
	if s.CounterRefresh <= 0 {
		return s.CounterLag, s.CounterLag
	}
	rec, _ := Generate(s)
	reach := func(dir time.Duration) time.Duration {
		same := func(d time.Duration) bool {
			lag := s.CounterLag + dir*d
			if lag < 0 || lag > maxLag {
				return false
			}
			twin := s
			twin.CounterLag = lag
			twin.RefreshPhase = (s.RefreshPhase - dir*d) % s.CounterRefresh
			if twin.RefreshPhase < 0 {
				twin.RefreshPhase += s.CounterRefresh
			}
			other, _ := Generate(twin)
			return sameReads(rec, other)
		}
		in, out := time.Duration(0), s.CounterRefresh
		for out-in > time.Millisecond {
			if mid := (in + out) / 2; same(mid) {
				in = mid
			} else {
				out = mid
			}
		}
		return dir * in
	}
	return s.CounterLag + reach(-1), s.CounterLag + reach(1)
}

// sameReads: every counter read of a and b returned the same values.
func sameReads(a, b *record.Recording) bool {
	if len(a.Counters) != len(b.Counters) {
		return false
	}
	for i := range a.Counters {
		if !maps.Equal(a.Counters[i].Values, b.Counters[i].Values) {
			return false
		}
	}
	return true
}
