package lab

import (
	"context"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestLaggedCounters: the lagged source shows a drop no sooner than its
// lag after the plain source does, and a read of it is cheap enough to
// sample every 10 ms.
func TestLaggedCounters(t *testing.T) {
	// Longer than the client runs (100 ms, then 500 ms for answers).
	const lag = 800 * time.Millisecond
	l := upLab(t, Config{LinkLocalPPS: 100, LinkLocalBurst: 5})
	src, err := l.LaggedCounters(lag, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Error(err)
		}
	}()
	before := readCounters(t, l)[counters.LinklocalAllowanceExceeded]
	// 100 queries in 100 ms against 100/s with a bucket of 5: the drops
	// begin with the first queries.
	sentNs := monoclock.Now()
	if _, err := l.LinkLocal(context.Background(), LinkLocalSpec{Service: record.ServiceDNS, Rate: 1000, Duration: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var readTook time.Duration
	reads := 0
	deadline := time.Now().Add(5 * time.Second)
	for {
		start := time.Now()
		v, err := src.Read()
		readTook = max(readTook, time.Since(start))
		reads++
		if err != nil {
			t.Fatal(err)
		}
		if v[counters.LinklocalAllowanceExceeded] > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lagged source never showed the drops")
		}
		time.Sleep(5 * time.Millisecond)
	}
	shownAfter := time.Duration(monoclock.Now() - sentNs)
	t.Logf("drops shown %v after the first query (lag %v), %d reads, slowest %v; a poll takes %v", shownAfter, lag, reads, readTook, src.MeanPoll())
	if now := readCounters(t, l)[counters.LinklocalAllowanceExceeded]; now <= before {
		t.Fatalf("the plain source did not see the drops: %d -> %d", before, now)
	}
	if shownAfter < lag-20*time.Millisecond {
		t.Errorf("drops shown %v after they happened, before the %v lag", shownAfter, lag)
	}
	if readTook > 5*time.Millisecond {
		t.Errorf("a read of the lagged source took %v: too slow to sample every 10 ms", readTook)
	}
	checkJumps(t, src, counters.LinklocalAllowanceExceeded, lag, 1)
	if _, err := l.LaggedCounters(-time.Second, 0); err == nil {
		t.Error("a negative lag must fail")
	}
}

// TestLaggedCountersRefresh: with a refresh period, the source changes
// only on its boundaries, however often it is read.
func TestLaggedCountersRefresh(t *testing.T) {
	const refresh = 200 * time.Millisecond
	l := upLab(t, Config{LinkLocalPPS: 100, LinkLocalBurst: 5})
	src, err := l.LaggedCounters(0, refresh)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Error(err)
		}
	}()
	// 800 ms of queries against 100/s: drops all along.
	done := make(chan error, 1)
	go func() {
		_, err := l.LinkLocal(context.Background(), LinkLocalSpec{Service: record.ServiceDNS, Rate: 1000, Duration: 800 * time.Millisecond})
		done <- err
	}()
	// Each change was published at a boundary after the read before it
	// and by the read that saw it: (before, at].
	type change struct{ before, at int64 }
	var changes []change
	var last uint64
	prev := monoclock.Now()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(changes) < 3 {
		v, err := src.Read()
		if err != nil {
			t.Fatal(err)
		}
		at := monoclock.Now()
		if now := v[counters.LinklocalAllowanceExceeded]; now != last {
			if last != 0 || len(changes) > 0 {
				changes = append(changes, change{prev, at})
			}
			last = now
		}
		prev = at
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(changes) < 2 {
		t.Fatalf("the source changed %d times over the queries, want at least 2", len(changes))
	}
	for k := 1; k < len(changes); k++ {
		// Two boundaries are at most as far apart as the read before
		// the first and the read that saw the second: a source that
		// published more often than its refresh fails this whatever
		// the reads' lateness (a busy host wakes a 5 ms sleep late).
		if most := time.Duration(changes[k].at - changes[k-1].before); most < refresh {
			t.Errorf("changes at most %v apart, the refresh is %v", most, refresh)
		}
	}
	checkJumps(t, src, counters.LinklocalAllowanceExceeded, 0, len(changes))
	if _, err := l.LaggedCounters(0, -time.Second); err == nil {
		t.Error("a negative refresh must fail")
	}
}

// checkJumps: the source recorded at least n jumps of counter, each as
// old as the lag at least (a value is taken by the poll's end, and shown
// a lag after it at the soonest) and as old as the oldest read served at
// most (it was taken after that poll began, and made visible by the read),
// made visible by its read at the latest.
func checkJumps(t *testing.T, src *LaggedCounters, counter string, lag time.Duration, n int) {
	t.Helper()
	var got []ShownJump
	for _, j := range src.Jumps() {
		if j.Counter == counter {
			got = append(got, j)
		}
	}
	if len(got) < n {
		t.Fatalf("%d jumps of %s recorded, want at least %d (all: %+v)", len(got), counter, n, src.Jumps())
	}
	for _, j := range got {
		if age := time.Duration(j.AgeNs); age < lag || age > src.MaxAge() {
			t.Errorf("jump at %d: shown %v old, want between the lag %v and the oldest read's %v", j.ReadNs, age, lag, src.MaxAge())
		}
		if j.ShownNs > j.ReadNs || j.ShownNs <= 0 {
			t.Errorf("jump read at %d made visible at %d: after its read", j.ReadNs, j.ShownNs)
		}
	}
	t.Logf("%d jumps of %s, the first shown %v old", len(got), counter, time.Duration(got[0].AgeNs))
}
