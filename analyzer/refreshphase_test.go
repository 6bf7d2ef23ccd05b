package analyzer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestRefreshPhaseDrift: a device that refreshes every 100 ms, read every
// 10 ms (each read dithered in the first half of its interval, as the
// sampler reads), over a 2 s incident: every jump's visible instant is
// placed within 2.5 ms and within the uncertainty stated (widen), whether the period learned from the gaps is the
// device's or 0.45% off either way. The lab's 100 ms came out 100.45 ms
// once, and the phase taken at the learned period drifted 0.6 to 6 ms
// across the jumps while every jump's reads still held it (a lag stated
// 6.3 ms late, where the lab's jumps were shown 28.2 ms late).
func TestRefreshPhaseDrift(t *testing.T) {
	const (
		period = 100_000_000
		readNs = 10_000_000
		jumps  = 20
	)
	for seed := uint64(1); seed <= 10; seed++ {
		for _, learned := range []int64{period, period * 10045 / 10000, period * 9955 / 10000} {
			t.Run(fmt.Sprintf("seed%d/learned%.2fms", seed, float64(learned)/1e6), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				start := int64(5_000_000_000_000) + rng.Int64N(period)
				phase := start + readNs + rng.Int64N(period) // after the first read
				rec := &record.Recording{}
				for k := int64(0); k < (jumps+2)*period/readNs; k++ {
					before := start + k*readNs + rng.Int64N(readNs/2)
					rec.Counters = append(rec.Counters, record.CounterSample{Interface: "ens5", BeforeNs: before, AfterNs: before + 300_000 + rng.Int64N(400_000)})
				}
				var cluster []counters.Jump
				var truth []int64
				r := 1
				for k := int64(0); k < jumps; k++ {
					visible := phase + k*period
					for r < len(rec.Counters) && rec.Counters[r].BeforeNs <= visible {
						r++
					}
					cluster = append(cluster, counters.Jump{Interface: "ens5", Name: counters.PPSAllowanceExceeded,
						FromNs: rec.Counters[r-1].AfterNs, ToNs: rec.Counters[r].BeforeNs, Delta: 100})
					truth = append(truth, visible)
				}
				a := &analysis{rec: rec}
				visible, widen, ok := a.refreshPhase(cluster, learned)
				if !ok {
					t.Fatal("no phase the jumps agree on")
				}
				for k := range cluster {
					if d := visible[k] - truth[k]; d > min(widen, 2_500_000) || d < -min(widen, 2_500_000) {
						t.Errorf("jump %d: visible at %+.2f ms of the truth, want within 2.5 ms and the ±%.2f ms stated", k, float64(d)/1e6, float64(widen)/1e6)
					}
				}
			})
		}
	}
}
