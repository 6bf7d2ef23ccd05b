package ena

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// read is a sample taking took, with the given values.
func read(atNs int64, took time.Duration, values map[string]uint64) record.CounterSample {
	return record.CounterSample{Interface: "eth0", BeforeNs: atNs, AfterNs: atNs + int64(took), Values: values}
}

// TestGuardHealthCounters: each health counter that moves backs the reads
// off at once to ten times the interval (a second at least); the third
// sign stops them. A counter present from the first read at a high value
// (interface_down is 1 after a boot) is no sign.
func TestGuardHealthCounters(t *testing.T) {
	for _, name := range HealthCounters {
		t.Run(name, func(t *testing.T) {
			gs := newGuardState(DefaultGuard)
			ms := time.Millisecond
			cur := 10 * ms
			for i := range 5 {
				if back, stop := gs.observe(read(int64(i), 100*time.Microsecond, map[string]uint64{name: 7}), cur); back != 0 || stop {
					t.Fatalf("read %d of a still counter: back off %v, stop %v", i, back, stop)
				}
			}
			back, stop := gs.observe(read(10, 100*time.Microsecond, map[string]uint64{name: 8}), cur)
			if back != time.Second || stop {
				t.Fatalf("%s moved: back off to %v, stop %v; want 1s and go on", name, back, stop)
			}
			cur = back
			if back, stop = gs.observe(read(11, 100*time.Microsecond, map[string]uint64{name: 10}), cur); back != 10*time.Second || stop {
				t.Fatalf("moved again: back off to %v, stop %v; want 10s", back, stop)
			}
			if _, stop = gs.observe(read(12, 100*time.Microsecond, map[string]uint64{name: 11}), cur); !stop {
				t.Fatal("third sign: reads go on")
			}
			st := gs.snapshot()
			if st.State != record.CounterGuardStopped || len(st.Events) != 3 || !strings.Contains(st.Events[0].Reason, name+" +1") ||
				st.Events[0].Action != record.CounterGuardBackedOff || st.Events[0].IntervalNs != int64(time.Second) || st.Events[0].Interface != "eth0" {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// TestGuardSlowReads: one read over 50 ms is a sign; so is a median far
// above the run's first, but not a slow median under the floor.
func TestGuardSlowReads(t *testing.T) {
	gs := newGuardState(DefaultGuard)
	if back, _ := gs.observe(read(0, 60*time.Millisecond, nil), 10*time.Millisecond); back != time.Second {
		t.Errorf("a 60 ms read: back off to %v, want 1s", back)
	}
	g := DefaultGuard
	gs = newGuardState(g)
	feed := func(took time.Duration) (signs int) {
		for i := range g.Window {
			if back, _ := gs.observe(read(int64(i), took, nil), time.Second); back != 0 {
				signs++
			}
		}
		return signs
	}
	if feed(200*time.Microsecond) != 0 || feed(time.Millisecond) != 0 {
		t.Error("a baseline, then a median 5x it but under 2 ms: a sign")
	}
	if n := feed(3 * time.Millisecond); n != 1 {
		t.Errorf("a median 15x the baseline and over 2 ms: %d signs, want 1", n)
	}
	if st := gs.snapshot(); st.Reads != 3*g.Window || !strings.Contains(st.Events[0].Reason, "median read 3ms") {
		t.Errorf("status %+v", st)
	}
}

// TestGuardOff: the zero Guard sees no sign, and still sums the reads.
func TestGuardOff(t *testing.T) {
	gs := newGuardState(Guard{})
	for i := range 10 {
		if back, stop := gs.observe(read(int64(i), time.Second, map[string]uint64{"wd_expired": uint64(i)}), time.Millisecond); back != 0 || stop {
			t.Fatal("the zero guard acted")
		}
	}
	if st := gs.snapshot(); st.ReadNs != int64(10*time.Second) || st.Reads != 10 || len(st.Events) != 0 {
		t.Errorf("status %+v", st)
	}
}

// movingSource reads as wd_expired 0 until moved, then 1, 2, ... a read.
type movingSource struct {
	mu    sync.Mutex
	moved bool
	n     uint64
	reads int
}

func (m *movingSource) Read() (map[string]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.moved {
		m.n++
	}
	return map[string]uint64{"wd_expired": m.n, "pps_allowance_exceeded": 0}, nil
}
func (m *movingSource) Kind() string { return "lab" }

// TestSamplerGuard: a health counter that moves makes Run back off at once,
// and stop reading when it goes on; Run returns on its own.
func TestSamplerGuard(t *testing.T) {
	src := &movingSource{}
	s, err := NewSampler("eth0", src, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	g := DefaultGuard
	g.Interval = 20 * time.Millisecond // the test's second: below ten times 5 ms
	s.SetBackoff(Backoff{Guard: g})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	var reads int
	go func() {
		defer close(done)
		s.Run(ctx, func(cs record.CounterSample) {
			reads++
			if reads == 20 {
				src.mu.Lock()
				src.moved = true
				src.mu.Unlock()
			}
		})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run did not stop reading")
	}
	st := s.Guarded()
	if st.State != record.CounterGuardStopped || len(st.Events) != 3 {
		t.Fatalf("status %+v", st)
	}
	if reads != 23 {
		t.Errorf("%d reads, want 20, then one per sign", reads)
	}
	// 5 ms, then ten times that at each sign.
	if got := time.Duration(st.Events[1].AtNs - st.Events[0].AtNs); got < 50*time.Millisecond {
		t.Errorf("second read %v after the first sign, want the backed-off 50ms at least", got)
	}
	if s.Current() != 500*time.Millisecond {
		t.Errorf("interval %v, want 500ms", s.Current())
	}
}

// TestGuardForSource: slow reads are signs only for the ethtool source.
func TestGuardForSource(t *testing.T) {
	if g := DefaultGuard.forSource(NewFileSource("x")); g.SlowRead != 0 || g.MedianFactor != 0 || g.StopAfter != DefaultGuard.StopAfter {
		t.Errorf("file source guard %+v", g)
	}
	if g := DefaultGuard.forSource(&EthtoolSource{}); g != DefaultGuard {
		t.Errorf("ethtool source guard %+v", g)
	}
}
