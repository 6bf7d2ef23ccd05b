package lab

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// LaggedCounters is a counter source that shows the lab's counters as
// they were Lag ago, as an ENA device can show a drop some ms after the
// traffic that moved it. A poller reads the kernel counters back to back
// in the background (one read takes a few ms, see Counters), so a
// trace can sample this source every 10 ms: a read only copies from the
// poller's history. The lag a reader sees is Lag plus the age of the
// poll it gets: up to one poll's duration more.
type LaggedCounters struct {
	lag  time.Duration
	l    *Lab
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	history []polled // oldest first, pruned past the lag
	err     error    // the poller's last error, once it stopped on one
	polls   int
	pollFor time.Duration // the time the polls took, summed
	maxAge  time.Duration // the oldest a value served was, from its poll's start
}

// polled is one read of the kernel counters, when it began and ended
// (CLOCK_MONOTONIC).
type polled struct {
	startNs, atNs int64
	values        map[string]uint64
}

// maxCounterLag bounds the emulated lag.
const maxCounterLag = 5 * time.Second

// LaggedCounters starts a poller and returns the source once it has a
// first read. Close stops the poller; closing the lab also ends it.
func (l *Lab) LaggedCounters(lag time.Duration) (*LaggedCounters, error) {
	if lag < 0 || lag > maxCounterLag {
		return nil, fmt.Errorf("lagged counters: lag %v outside [0, %v]", lag, maxCounterLag)
	}
	s := &LaggedCounters{lag: lag, l: l, stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.poll(); err != nil {
		return nil, fmt.Errorf("lagged counters: %w", err)
	}
	go s.run()
	return s, nil
}

func (s *LaggedCounters) poll() error {
	start := monoclock.Now()
	v, err := s.l.readCounters()
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
	s.history = append(s.history, polled{startNs: start, atNs: at, values: v})
	// Keep the newest read older than the lag, and everything after it.
	cut := at - int64(s.lag)
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

// Read returns the newest poll that ended at least Lag ago (the oldest
// one kept while none has yet).
func (s *LaggedCounters) Read() (map[string]uint64, error) {
	cut := monoclock.Now() - int64(s.lag)
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
	s.maxAge = max(s.maxAge, time.Duration(cut+int64(s.lag)-p.startNs))
	out := make(map[string]uint64, len(p.values))
	for k, v := range p.values {
		out[k] = v
	}
	return out, nil
}

// MeanPoll is how long one read of the kernel counters took on average:
// the age a read of this source adds to Lag.
func (s *LaggedCounters) MeanPoll() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pollFor / time.Duration(max(s.polls, 1))
}

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
