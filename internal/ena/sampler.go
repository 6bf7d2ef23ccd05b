package ena

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// DefaultInterval is the time between two counter reads unless told
// otherwise. A counter jump is only known to lie between two reads, so the
// interval is the time resolution at which an allowance counter can be tied
// to what the eBPF buckets saw: 10 ms places a pps or bandwidth jump within a
// window of a few fine buckets, where 50 ms (the most the design allows) would
// blur a short burst into its surroundings and 1 s (the CloudWatch agent's
// finest) hides it. The price is 100 reads a second; on ENA each read is one
// or two synchronous admin commands to the device, one at a time from a
// sampler, with no cache and no rate limit in the driver. That cost has not
// been measured on every instance type: counters.Latency over the recorded
// samples shows it, and NewSampler takes a longer interval where it matters.
const DefaultInterval = 10 * time.Millisecond

// MinInterval is the shortest interval a Sampler accepts.
const MinInterval = time.Millisecond

// Sampler reads one Source about every interval (dithered within it: Run)
// and stamps each read with CLOCK_MONOTONIC just before and just after it.
type Sampler struct {
	iface    string
	source   Source
	interval time.Duration
	backoff  Backoff
	guard    *guardState
	current  atomic.Int64 // the interval in use, ns
	// unlocked turns off the extra reads where a refresh is due
	// (refreshLock): for tests that compare with it.
	unlocked bool
	// refresh is the device's refresh as the user gave it, 0 unknown.
	refresh time.Duration
}

// Backoff makes a sampler gentle on a slow device: when Slow reads in a
// row each take more than Share of the interval (the device spends that
// share of its time answering us), the interval doubles, up to Max; after
// Recover reads in a row that took under a quarter of that, it halves back
// toward the interval it was made with. One slow read is not enough: a
// read's stamps include the time the sampler's thread waited for a CPU.
// The zero Backoff keeps the interval fixed. Guard, the same for trace and
// serve, backs off at once on signs of a struggling device (guard.go).
type Backoff struct {
	Max     time.Duration
	Share   float64
	Slow    int
	Recover int
	Guard   Guard
}

// NewSampler samples source, the counters of interface iface, every
// interval; 0 means DefaultInterval.
func NewSampler(iface string, source Source, interval time.Duration) (*Sampler, error) {
	if source == nil {
		return nil, errors.New("new sampler: nil source")
	}
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval < MinInterval {
		return nil, fmt.Errorf("new sampler for %s: interval %v below the minimum %v", iface, interval, MinInterval)
	}
	sa := &Sampler{iface: iface, source: source, interval: interval, guard: newGuardState(Guard{})}
	sa.current.Store(int64(interval))
	return sa, nil
}

// SetBackoff turns backing off on, before Run.
func (s *Sampler) SetBackoff(b Backoff) {
	s.backoff, s.guard = b, newGuardState(b.Guard.forSource(s.source))
}

// SetRefresh tells the sampler, before Run, how often the device
// refreshes its counters (--counter-refresh; 0 or less: unknown), so that
// its extra reads fall where a change is due from the first change on
// (refreshLock).
func (s *Sampler) SetRefresh(d time.Duration) { s.refresh = max(d, 0) }

// Refresh is the device's refresh SetRefresh gave, 0 unknown.
func (s *Sampler) Refresh() time.Duration { return s.refresh }

// Interval is the time between two reads the sampler was made with.
func (s *Sampler) Interval() time.Duration { return s.interval }

// Current is the interval in use: Interval, or longer while backing off.
// Safe to call while Run runs.
func (s *Sampler) Current() time.Duration { return time.Duration(s.current.Load()) }

// next is the interval after a read that took took, given the interval in
// use and the run of reads before it: n > 0 fast reads in a row, n < 0
// slow ones.
func (b Backoff) next(base, cur, took time.Duration, n int) (time.Duration, int) {
	if b.Max <= base || b.Share <= 0 {
		return cur, 0
	}
	limit := time.Duration(float64(cur) * b.Share)
	switch {
	case took > limit:
		slow := -min(n, 0) + 1
		if slow >= max(b.Slow, 1) {
			return min(2*cur, b.Max), 0
		}
		return cur, -slow
	case took <= limit/4 && cur > base:
		fast := max(n, 0) + 1
		if fast >= max(b.Recover, 1) {
			return max(cur/2, base), 0
		}
		return cur, fast
	}
	return cur, 0
}

// Sample reads the source once. A failed read carries Err and no values.
func (s *Sampler) Sample() record.CounterSample {
	before := monoclock.Now()
	values, err := s.source.Read()
	after := monoclock.Now()
	cs := record.CounterSample{Interface: s.iface, BeforeNs: before, AfterNs: after}
	if err != nil {
		cs.Err = err.Error()
	} else {
		cs.Values = values
	}
	return cs
}

// Run samples at once, then once in every interval after, and hands each
// sample to emit, until ctx is done. Each read falls at a random point of
// the first half of its interval (dithered): a device that publishes its
// counters on a period of its own, a multiple of the interval (the lab's
// 100 ms, read every 10 ms), would otherwise be read at one phase of it
// every time, and when it makes a change visible would stay unknown within
// a whole interval however many changes the run saw; dithered, the reads
// around the changes narrow it (the analyzer's refreshPhase). The reads
// average one an interval, one in each. Where the counters change on a
// period of half a second or more, a few reads more fall where the next
// change is due (refreshLock, lock.go: at most an eighth more, and none
// while backing off). Reads never overlap: when a read (or emit, which
// runs on the sampling goroutine and should be quick) outlasts the
// interval, the intervals it covered are dropped instead of queued, so a
// slow device is not flooded with catch-up reads.
func (s *Sampler) Run(ctx context.Context, emit func(record.CounterSample)) {
	if ctx.Err() != nil {
		return
	}
	cur, fast := s.interval, 0
	base, stopped := s.interval, false // base: the shortest interval allowed now
	var lock *refreshLock
	if !s.unlocked {
		lock = newRefreshLock(int64(s.interval), int64(s.refresh))
	}
	sample := func() {
		cs := s.Sample()
		if lock != nil {
			lock.observe(cs)
		}
		emit(cs)
		var backOff time.Duration
		if backOff, stopped = s.guard.observe(cs, cur); stopped {
			return
		}
		if backOff > 0 {
			base, cur = backOff, backOff
			s.current.Store(int64(cur))
		}
		next, f := s.backoff.next(base, cur, time.Duration(cs.AfterNs-cs.BeforeNs), fast)
		fast = f
		if next != cur {
			cur = next
			s.current.Store(int64(cur))
		}
	}
	slot := time.Now() // the start of the interval the last read fell in
	sample()
	if stopped {
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// wait waits d, false when ctx is done first. When the timer and the
	// cancellation are both ready, select picks either: stopping wins.
	wait := func(d time.Duration) bool {
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return ctx.Err() == nil
		}
	}
	for {
		was := cur
		slot = slot.Add(cur)
		if now := time.Now(); now.Sub(slot) > 0 {
			// Intervals the read outlasted are dropped; the next read
			// falls in the one under way.
			slot = slot.Add(now.Sub(slot) / cur * cur)
		}
		at := slot.Add(rand.N(cur / 2))
		// The lock's reads due before this one come first.
		for lock != nil {
			now := monoclock.Now()
			x := lock.next(now, int64(cur))
			if x == 0 || x >= now+int64(time.Until(at)) {
				break
			}
			if !wait(time.Duration(x - now)) {
				return
			}
			lock.read()
			if sample(); stopped {
				return
			}
		}
		if !wait(time.Until(at)) {
			return
		}
		if sample(); stopped {
			return
		}
		if cur != was {
			slot = time.Now() // a new interval starts from this read
		}
	}
}
