package analyzer

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

// fuzzRecording is a trace with a link-local flood and a connection
// flood behind counters that refresh every 100 ms and lag 30 ms: every
// model that learns a counter's timing has something to work on.
func fuzzRecording() *record.Recording {
	ifc := synth.Interface{Name: "eth0", ENA: true, ConntrackCapacity: 150, LinkLocalBurst: 64}
	dns := synth.Flow{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: netip.AddrPortFrom(incHost, 53535),
		Dst: netip.AddrPortFrom(incDNS, 53), Size: 80, Phases: []synth.Phase{{From: 500 * time.Millisecond, To: 2 * time.Second, Bps: 1300 * 80 * 8}}}
	flood := synth.SYNFlood{Interface: "eth0", Dir: record.Egress, Src: incHost, Dst: incDB, PerSecond: 300,
		From: 1500 * time.Millisecond, To: 2500 * time.Millisecond, RetryAfter: []time.Duration{time.Second}}
	rec, _ := synth.Generate(synth.Spec{Name: "fuzz_counters", Duration: 5 * time.Second, Seed: 40,
		SampleNs: incSampleNs, CounterLag: 30 * time.Millisecond, CounterRefresh: 100 * time.Millisecond,
		Interfaces: []synth.Interface{ifc}, Flows: []synth.Flow{dns}, SYNFloods: []synth.SYNFlood{flood}})
	return rec
}

// fuzzOvershoot is TestOvershootThenBurst's trace, its counters 30 ms
// late: the long overshoot's models (the bucket's depth from two lags, the
// refresh's phase, the level split from its jitter, the clusters parted
// between two causes) and the burst's look-back over a refresh.
func fuzzOvershoot() *record.Recording {
	rec, _ := synth.Generate(overshootThenBurst(30 * time.Millisecond))
	return rec
}

// overshootMark leads an input of FuzzCounters that perturbs fuzzOvershoot.
const overshootMark = 0xfe

// fuzzTwoOvershoots is TestTwoCausesApart's two overshoots behind a 1 s
// refresh and a 1 s lag, analyzed with the allowance given: one cluster
// parted where one bucket says (sameBucket), each part placed from its
// end (endLag); with the input's second byte, a refresh given too.
func fuzzTwoOvershoots() *record.Recording {
	spec := apartSpec("fuzz_two_overshoots", []synth.Flow{apartOvershoot(42101, time.Second), apartOvershoot(42102, 3700*time.Millisecond)})
	spec.CounterLag, spec.CounterRefresh, spec.RefreshPhase = time.Second, time.Second, 370*time.Millisecond
	rec, _ := synth.Generate(spec)
	return rec
}

// twoOvershootsMark leads an input of FuzzCounters that perturbs
// fuzzTwoOvershoots.
const twoOvershootsMark = 0xfd

// FuzzCounters: counters a device or a bundle got wrong (values that jump
// anywhere, go back, reads out of order or overlapping) never make the
// analysis panic, and its findings stay well formed: the learned timing's
// models (a conntrack table's refused SYNs, a link-local bucket's count)
// take whatever the reads say.
func FuzzCounters(f *testing.F) {
	bases := []*record.Recording{fuzzRecording(), fuzzOvershoot(), fuzzTwoOvershoots()}
	f.Add([]byte{0})
	f.Add([]byte{1, 200, 3, 0, 255, 17, 9})
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 128})
	f.Add([]byte{overshootMark})
	f.Add([]byte{overshootMark, 9, 2, 16, 1, 0})
	f.Add([]byte{twoOvershootsMark})
	f.Add([]byte{twoOvershootsMark, 8, 8, 8, 8, 3, 8, 8})
	f.Add([]byte{twoOvershootsMark, 1})
	f.Add([]byte{twoOvershootsMark, 2, 1, 17})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		// A first byte of overshootMark or twoOvershootsMark picks the
		// second or third trace, the third analyzed with the allowance
		// given (the inputs kept before they came keep their meaning).
		base, opt := bases[0], DefaultOptions()
		switch b[0] {
		case overshootMark:
			base = bases[1]
		case twoOvershootsMark:
			base = bases[2]
			opt.PPSAllowance, opt.BaselineBps, opt.BurstBps = 8000, 40e6, 40e6
			if len(b) > 1 {
				// A refresh given, right or wrong (--counter-refresh).
				opt.CounterRefresh = []time.Duration{0, time.Second, RefreshEveryRead, 100 * time.Millisecond}[b[1]%4]
			}
		}
		rec := *base
		rec.Counters = slices.Clone(base.Counters)
		names := []string{}
		for name := range base.Counters[0].Values {
			names = append(names, name)
		}
		slices.Sort(names)
		for k := range rec.Counters {
			s := rec.Counters[k]
			values := make(map[string]uint64, len(s.Values))
			for j, name := range names {
				x := b[(k*len(names)+j)%len(b)]
				v := s.Values[name]
				switch x % 8 {
				case 0:
					v += uint64(x) * uint64(k%7)
				case 1:
					v = uint64(x) << (k % 40)
				case 2:
					v /= 2
				}
				values[name] = v
			}
			s.Values = values
			switch y := b[k%len(b)]; y % 16 {
			case 0:
				s.BeforeNs -= int64(y) * int64(time.Millisecond)
			case 1:
				s.AfterNs += int64(y) * int64(time.Millisecond)
			case 2:
				s.Err = "read failed"
				s.Values = nil
			}
			rec.Counters[k] = s
		}
		if record.Validate(&rec) != nil {
			return // analyze never sees it: reading a bundle validates it
		}
		res := Analyze(&rec, opt)
		for _, f := range res.Findings {
			if f.EndOffsetS < f.StartOffsetS {
				t.Errorf("%s ends at %.4f s, before its start at %.4f s", f.Kind, f.EndOffsetS, f.StartOffsetS)
			}
			if inc := f.Incident; inc != nil && (inc.CounterLagLowS > inc.CounterLagHighS || inc.CounterLagS < 0) {
				t.Errorf("%s states a lag of %.4f s (%.4f to %.4f)", f.Kind, inc.CounterLagS, inc.CounterLagLowS, inc.CounterLagHighS)
			}
		}
	})
}
