package lab

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// LaggedCounters is a counter source that shows the lab's counters as
// they were Lag ago, as an ENA device can show a drop some ms after the
// traffic that moved it. A poller reads the kernel counters back to back
// in the background (a read takes half a millisecond, see Counters), so
// a trace can sample this source every 10 ms: a read only copies from the
// poller's history. The lag a reader sees is Lag plus the age of the
// poll it gets: up to one poll's duration more.
//
// With a refresh period, the source publishes what it shows only on
// refresh boundaries (at a random phase of its own, as a device's clock
// is not the trace's): a read between two boundaries returns what was
// shown at the last one.
type LaggedCounters struct {
	lag time.Duration
	// refresh and phaseNs place the boundaries: phaseNs plus multiples
	// of refresh (CLOCK_MONOTONIC); refresh 0 publishes every poll.
	refresh time.Duration
	phaseNs int64
	l       *Lab
	stop    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	history []polled // oldest first, pruned past the lag
	err     error    // the poller's last error, once it stopped on one
	polls   int
	pollFor time.Duration // the time the polls took, summed
	maxAge  time.Duration // the oldest a value served was, from its poll's start
	// firstNs and lastNs are the first and last poll's start: the
	// polls' mean spacing.
	firstNs, lastNs int64
	// times are every poll's start and end, for ShownAt (at most
	// maxPollTimes: an hour of polls a millisecond apart).
	times []pollTime
	// lastShown is what the last Read returned; jumps every change a
	// Read showed (at most maxPollTimes).
	lastShown map[string]uint64
	jumps     []ShownJump
}

// ShownJump is a read of the source that showed a counter changed: when
// (CLOCK_MONOTONIC), and how old the value was at the instant the source
// made it visible (the read itself, or with a refresh the boundary it was
// published at, plus the lag): from when the lab's dump took it. It is the
// lag that jump had, which an analyzer learns per jump: a run's mean
// delay (MeanDelay) counts from each poll's start, where under load a
// poll takes tens of ms and its values are taken anywhere within it.
// ShownNs is that instant of making it visible.
type ShownJump struct {
	Counter                string
	ReadNs, ShownNs, AgeNs int64
}

// pollTime is when one poll began and ended (CLOCK_MONOTONIC).
type pollTime struct{ startNs, atNs int64 }

const maxPollTimes = 1 << 22

// polled is one read of the kernel counters, when it began and ended
// (CLOCK_MONOTONIC).
type polled struct {
	startNs, atNs int64
	values        map[string]uint64
	sampledNs     map[string]int64 // when each value was taken (readCounters)
}

// maxCounterLag bounds the emulated lag, maxCounterRefresh the refresh.
const (
	maxCounterLag     = 5 * time.Second
	maxCounterRefresh = 5 * time.Second
)

// LaggedCounters starts a poller and returns the source once it has a
// first read. Close stops the poller; closing the lab also ends it.
func (l *Lab) LaggedCounters(lag, refresh time.Duration) (*LaggedCounters, error) {
	if lag < 0 || lag > maxCounterLag {
		return nil, fmt.Errorf("lagged counters: lag %v outside [0, %v]", lag, maxCounterLag)
	}
	if refresh < 0 || refresh > maxCounterRefresh {
		return nil, fmt.Errorf("lagged counters: refresh %v outside [0, %v]", refresh, maxCounterRefresh)
	}
	s := &LaggedCounters{lag: lag, refresh: refresh, l: l, stop: make(chan struct{}), done: make(chan struct{})}
	if refresh > 0 {
		s.phaseNs = rand.Int64N(int64(refresh))
	}
	if err := s.poll(); err != nil {
		return nil, fmt.Errorf("lagged counters: %w", err)
	}
	go s.run()
	return s, nil
}

func (s *LaggedCounters) poll() error {
	start := monoclock.Now()
	v, sampled, err := s.l.readCounters(false)
	if err != nil {
		return err
	}
	// The values may hold what happened until the read ended: shown from
	// then on, a drop is never shown sooner than the lag.
	at := monoclock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	s.pollFor += time.Duration(at - start)
	if s.firstNs == 0 {
		s.firstNs = start
	}
	s.lastNs = start
	s.history = append(s.history, polled{startNs: start, atNs: at, values: v, sampledNs: sampled})
	if len(s.times) < maxPollTimes {
		s.times = append(s.times, pollTime{start, at})
	}
	// Keep the newest read older than the lag and the last boundary, and
	// everything after it.
	cut := s.shownBy(at)
	keep := 0
	for i := range s.history {
		if s.history[i].atNs <= cut {
			keep = i
		}
	}
	s.history = s.history[keep:]
	return nil
}

func (s *LaggedCounters) run() {
	defer close(s.done)
	for {
		// A breath between polls lets a plain read of the lab's
		// counters take the lock.
		select {
		case <-s.stop:
			return
		case <-time.After(time.Millisecond):
		}
		if err := s.poll(); err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
	}
}

// Kind names the source for reports.
func (s *LaggedCounters) Kind() string { return "lab" }

// shownBy is the latest instant whose polls a read at ns shows: Lag
// before, and with a refresh the boundary before that.
func (s *LaggedCounters) shownBy(ns int64) int64 {
	cut := ns - int64(s.lag)
	if r := int64(s.refresh); r > 0 {
		cut = s.phaseNs + (cut-s.phaseNs)/r*r
	}
	return cut
}

// Read returns the newest poll that ended by shownBy (the oldest one kept
// while none has yet).
func (s *LaggedCounters) Read() (map[string]uint64, error) {
	now := monoclock.Now()
	cut := s.shownBy(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, fmt.Errorf("read lagged lab counters: %w", s.err)
	}
	p := s.history[0]
	for _, h := range s.history {
		if h.atNs <= cut {
			p = h
		}
	}
	s.maxAge = max(s.maxAge, time.Duration(now-p.startNs))
	out := make(map[string]uint64, len(p.values))
	for k, v := range p.values {
		out[k] = v
		if last, ok := s.lastShown[k]; ok && last != v && len(s.jumps) < maxPollTimes {
			s.jumps = append(s.jumps, ShownJump{Counter: k, ReadNs: now, ShownNs: cut + int64(s.lag), AgeNs: cut + int64(s.lag) - p.sampledNs[k]})
		}
	}
	s.lastShown = p.values
	return out, nil
}

// Jumps is every change a read of the source showed, oldest first.
func (s *LaggedCounters) Jumps() []ShownJump {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jumps)
}

// ShownAt is when a drop at ns was first shown: from the end of the first
// poll that began after it, Lag later (a poll under way at ns may have
// read it too; it is not counted on), and with a refresh at the boundary
// after that. ok is false when no poll began after ns.
func (s *LaggedCounters) ShownAt(ns int64) (shown int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.times, ns, func(p pollTime, t int64) int { return cmp.Compare(p.startNs, t) })
	if i == len(s.times) {
		return 0, false
	}
	shown = s.times[i].atNs + int64(s.lag)
	if r := int64(s.refresh); r > 0 {
		// The first boundary b (phase plus a multiple of the refresh)
		// with b + lag at or after the poll's end.
		k := (s.times[i].atNs - s.phaseNs + r - 1) / r
		shown = s.phaseNs + k*r + int64(s.lag)
	}
	return shown, true
}

// MeanPoll is how long one read of the kernel counters took on average:
// the age a read of this source adds to Lag.
func (s *LaggedCounters) MeanPoll() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pollFor / time.Duration(max(s.polls, 1))
}

// MeanDelay is how long after the traffic a drop is shown on average,
// refresh aside: Lag, plus the poll's duration (a poll is shown from its
// end), plus half the spacing of the polls (a drop waits for the next
// poll to begin). It is the lag a reader of this source sees.
func (s *LaggedCounters) MeanDelay() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := time.Duration(max(s.polls, 1))
	spacing := time.Duration(0)
	if s.polls > 1 {
		spacing = time.Duration(s.lastNs-s.firstNs) / (n - 1)
	}
	return s.lag + s.pollFor/n + spacing/2
}

// Refresh is the refresh period the source publishes at (0: every poll).
func (s *LaggedCounters) Refresh() time.Duration { return s.refresh }

// MaxAge is the oldest a value Read returned was: how long before the
// read the poll that took it began. It is the most a drop was shown late:
// Lag, the poll's age, and the poll's own duration.
func (s *LaggedCounters) MaxAge() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxAge
}

// Close stops the poller and waits for it.
func (s *LaggedCounters) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil && !errors.Is(s.err, errLabClosed) {
		return s.err
	}
	return nil
}
