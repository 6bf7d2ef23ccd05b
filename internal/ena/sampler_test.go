package ena

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// fakeSource counts its reads; every failEvery-th read fails, and each read
// takes readTime.
type fakeSource struct {
	mu        sync.Mutex
	reads     uint64
	failEvery uint64
	readTime  time.Duration
	// late, once set, is called by every read: a read that should not have
	// come (after the sampler's Run returned) fails the test whenever it
	// comes, with no sleep to wait for it.
	late func()
}

func (f *fakeSource) Read() (map[string]uint64, error) {
	f.mu.Lock()
	f.reads++
	n := f.reads
	late := f.late
	f.mu.Unlock()
	if late != nil {
		late()
	}
	time.Sleep(f.readTime)
	if f.failEvery > 0 && n%f.failEvery == 0 {
		return map[string]uint64{"reads": n}, errors.New("admin queue timeout")
	}
	return map[string]uint64{"reads": n}, nil
}

func (f *fakeSource) Kind() string { return "lab" }

func (f *fakeSource) count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// runFor runs the sampler for about d and returns the samples and the time
// Run actually ran.
func runFor(t *testing.T, s *Sampler, d time.Duration) ([]record.CounterSample, time.Duration) {
	t.Helper()
	var samples []record.CounterSample
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	s.Run(ctx, func(cs record.CounterSample) { samples = append(samples, cs) })
	return samples, time.Since(start)
}

func TestNewSampler(t *testing.T) {
	src := &fakeSource{}
	s, err := NewSampler("eth0", src, 0)
	if err != nil || s.Interval() != DefaultInterval {
		t.Errorf("interval 0: %v, %v; want the default", s, err)
	}
	if DefaultInterval > 50*time.Millisecond || DefaultInterval < MinInterval {
		t.Errorf("default %v outside [%v, 50ms]", DefaultInterval, MinInterval)
	}
	if s, err := NewSampler("eth0", src, time.Millisecond); err != nil || s.Interval() != time.Millisecond {
		t.Errorf("1ms: %v, %v", s, err)
	}
	if _, err := NewSampler("eth0", src, 500*time.Microsecond); err == nil {
		t.Error("500µs accepted")
	}
	if _, err := NewSampler("eth0", src, -time.Second); err == nil {
		t.Error("negative interval accepted")
	}
	if _, err := NewSampler("eth0", nil, 0); err == nil {
		t.Error("nil source accepted")
	}
}

func TestSamplerRun(t *testing.T) {
	const interval = 5 * time.Millisecond
	src := &fakeSource{failEvery: 4}
	s, err := NewSampler("eth0", src, interval)
	if err != nil {
		t.Fatal(err)
	}
	samples, ran := runFor(t, s, 300*time.Millisecond)

	// One sample at once, then at most one per tick; under load ticks are
	// dropped, so only a loose lower bound.
	if max := int(ran/interval) + 1; len(samples) > max {
		t.Errorf("%d samples in %v at %v, more than %d", len(samples), ran, interval, max)
	}
	if len(samples) < 5 {
		t.Errorf("%d samples in %v at %v", len(samples), ran, interval)
	}
	if uint64(len(samples)) != src.count() {
		t.Errorf("%d samples for %d reads", len(samples), src.count())
	}
	for i, cs := range samples {
		if cs.Interface != "eth0" || cs.BeforeNs <= 0 || cs.BeforeNs > cs.AfterNs {
			t.Fatalf("sample %d: %+v", i, cs)
		}
		if i > 0 && cs.BeforeNs < samples[i-1].AfterNs {
			t.Fatalf("sample %d began at %d before sample %d ended at %d", i, cs.BeforeNs, i-1, samples[i-1].AfterNs)
		}
		n := uint64(i + 1) // the fake numbers its reads
		if n%4 == 0 {
			if cs.Err == "" || cs.Values != nil {
				t.Errorf("sample %d: failed read carries values %v, err %q", i, cs.Values, cs.Err)
			}
		} else if cs.Err != "" || cs.Values["reads"] != n {
			t.Errorf("sample %d: %+v, want reads=%d", i, cs, n)
		}
	}
	// Reads follow the ticker, not faster: the mean gap is the interval
	// (ticks are never early; late or dropped ones only widen it).
	n := len(samples)
	if n > 1 {
		mean := time.Duration((samples[n-1].BeforeNs - samples[0].BeforeNs) / int64(n-1))
		if mean < interval*9/10 {
			t.Errorf("mean gap %v, interval %v", mean, interval)
		}
	}
}

// TestSamplerDithers: the reads fall at random points of their intervals,
// not on a fixed tick: the gaps between them depart from the interval by
// a median of about 1.5 ms at 10 ms (|u1 - u2| of two uniform points of
// half an interval), where a ticker's depart by its wake-up latency.
func TestSamplerDithers(t *testing.T) {
	const interval = 10 * time.Millisecond
	s, err := NewSampler("eth0", &fakeSource{}, interval)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := runFor(t, s, 800*time.Millisecond)
	var off []time.Duration
	for i := 1; i < len(samples); i++ {
		off = append(off, (time.Duration(samples[i].BeforeNs-samples[i-1].BeforeNs) - interval).Abs())
	}
	if len(off) < 20 {
		t.Fatalf("%d reads in 800 ms at %v", len(samples), interval)
	}
	slices.Sort(off)
	if med := off[len(off)/2]; med < 700*time.Microsecond {
		t.Errorf("gaps depart from the interval by a median of %v: the reads are not dithered", med)
	}
}

func TestSamplerSlowSource(t *testing.T) {
	// Reads slower than the interval: they never overlap and do not pile up.
	const readTime = 15 * time.Millisecond
	src := &fakeSource{readTime: readTime}
	s, err := NewSampler("eth0", src, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	samples, ran := runFor(t, s, 200*time.Millisecond)
	if max := int(ran/readTime) + 1; len(samples) > max {
		t.Errorf("%d samples of %v reads in %v, more than %d", len(samples), readTime, ran, max)
	}
	for i := 1; i < len(samples); i++ {
		if samples[i].BeforeNs < samples[i-1].AfterNs {
			t.Fatalf("reads %d and %d overlap", i-1, i)
		}
		if d := time.Duration(samples[i].AfterNs - samples[i].BeforeNs); d < readTime {
			t.Errorf("read %d took %v, the source sleeps %v", i, d, readTime)
		}
	}
}

func TestSamplerCancel(t *testing.T) {
	src := &fakeSource{}
	s, err := NewSampler("eth0", src, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	emitted := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, func(record.CounterSample) {
			mu.Lock()
			emitted++
			mu.Unlock()
		})
	}()
	// Let it emit before the cancel.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := emitted
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing emitted within 5 s")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	mu.Lock()
	after := emitted
	mu.Unlock()
	if after == 0 {
		t.Error("nothing emitted before cancel")
	}
	src.mu.Lock()
	src.late = func() { t.Error("a read after Run returned") }
	reads := src.reads
	src.mu.Unlock()
	if reads != uint64(after) {
		t.Errorf("%d reads, %d emitted: a read whose sample Run did not emit", reads, after)
	}

	// A context already done: no read at all.
	src2 := &fakeSource{}
	s2, _ := NewSampler("eth0", src2, time.Millisecond)
	s2.Run(ctx, func(record.CounterSample) { t.Error("emitted after cancel") })
	if src2.count() != 0 {
		t.Errorf("%d reads with a done context", src2.count())
	}
}

// TestBackoff: slow reads double the interval up to Max, fast reads in a
// row bring it back down to the base, never below.
func TestBackoff(t *testing.T) {
	b := Backoff{Max: 8 * time.Second, Share: 0.01, Slow: 2, Recover: 3}
	base := time.Second
	cur, fast := b.next(base, base, 20*time.Millisecond, 0) // 2% of 1 s
	if cur != base {
		t.Fatalf("after one slow read: %v, want still %v", cur, base)
	}
	cur, fast = b.next(base, cur, 20*time.Millisecond, fast)
	if cur != 2*time.Second {
		t.Fatalf("after two slow reads: %v, want 2s", cur)
	}
	for range 10 {
		cur, fast = b.next(base, cur, time.Second, fast)
	}
	if cur != b.Max {
		t.Fatalf("after slow reads: %v, want the max %v", cur, b.Max)
	}
	for i := range 3 {
		cur, fast = b.next(base, cur, time.Millisecond, fast)
		if i < 2 && cur != b.Max {
			t.Fatalf("after %d fast reads: %v, want still %v", i+1, cur, b.Max)
		}
	}
	if cur != 4*time.Second {
		t.Fatalf("after 3 fast reads: %v, want 4s", cur)
	}
	for range 20 {
		cur, fast = b.next(base, cur, time.Millisecond, fast)
	}
	if cur != base {
		t.Fatalf("after many fast reads: %v, want the base %v", cur, base)
	}
	if c, _ := (Backoff{}).next(base, base, time.Hour, 0); c != base {
		t.Fatalf("the zero Backoff moved the interval to %v", c)
	}
}

// TestSamplerBacksOff: a source slower than Share of the interval makes
// Run lengthen the interval, and Current reports it.
func TestSamplerBacksOff(t *testing.T) {
	src := &slowSource{delay: 3 * time.Millisecond}
	s, err := NewSampler("x", src, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s.SetBackoff(Backoff{Max: 160 * time.Millisecond, Share: 0.1, Slow: 2, Recover: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, func(record.CounterSample) {}) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Current() < 40*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if s.Current() < 40*time.Millisecond {
		t.Fatalf("interval %v after slow reads, want at least 40ms", s.Current())
	}
}

type slowSource struct{ delay time.Duration }

func (s *slowSource) Read() (map[string]uint64, error) {
	time.Sleep(s.delay)
	return map[string]uint64{"pps_allowance_exceeded": 0}, nil
}
func (s *slowSource) Kind() string { return "slow" }
