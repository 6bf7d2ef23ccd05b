package ena

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// simDevice publishes a counter that rises at boundaries phase + k*period
// for k in shows (all k when nil); reads of it take readNs.
type simDevice struct {
	period, phase, readNs int64
	shows                 func(k int64) bool
}

func (d simDevice) value(ns int64) uint64 {
	var v uint64
	for k := int64(0); d.phase+k*d.period <= ns; k++ {
		if d.shows == nil || d.shows(k) {
			v++
		}
	}
	return v
}

// simRun reads d as Sampler.Run does, with the lock (or not) given the
// refresh (0: none given), every base ns dithered, for runNs: the arcs of
// the changes it saw (oldest first), and how many base and extra reads it
// made.
func simRun(d simDevice, base, runNs int64, locked bool, given int64, seed uint64) (arcs []arc, baseReads, extra int, lock *refreshLock) {
	r := rand.New(rand.NewPCG(seed, 1))
	lock = newRefreshLock(base, given)
	now := int64(time.Second) // the clock's start, off the device's phase
	end := now + runNs
	var last uint64
	var lastBefore int64
	read := func() {
		v := d.value(now + d.readNs/2)
		cs := record.CounterSample{Interface: "eth0", BeforeNs: now, AfterNs: now + d.readNs,
			Values: map[string]uint64{counters.PPSAllowanceExceeded: v}}
		if lastBefore > 0 && v != last {
			arcs = append(arcs, arc{lastBefore, cs.AfterNs})
		}
		last, lastBefore = v, now
		lock.observe(cs)
		now = cs.AfterNs
	}
	read()
	baseReads = 1
	for slot := now; ; {
		slot += base
		if now > slot {
			slot += (now - slot) / base * base
		}
		at := slot + r.Int64N(base/2)
		for locked {
			x := lock.next(now, base)
			if x == 0 || x >= at {
				break
			}
			now = max(now, x)
			lock.read()
			read()
			extra++
		}
		if at >= end {
			return arcs, baseReads, extra, lock
		}
		now = max(now, at)
		read()
		baseReads++
	}
}

// TestRefreshLockNarrows: a device that refreshes every 500 ms, 1 s or
// 1.23 s, read every 10 ms: with the lock, each change from the third on is known
// within a few ms (the reads it adds where the change is due), where the
// dithered reads alone know it within 5 to 15 ms; the extra reads stay
// within their budget, an eighth of the base reads.
func TestRefreshLockNarrows(t *testing.T) {
	const base = int64(10 * time.Millisecond)
	for _, period := range []time.Duration{500 * time.Millisecond, time.Second, 1234567 * time.Microsecond} {
		for seed := uint64(1); seed <= 5; seed++ {
			d := simDevice{period: int64(period), phase: int64(seed) * 7919 * int64(time.Microsecond), readNs: 200_000}
			arcs, baseReads, extra, lock := simRun(d, base, 20*int64(period), true, 0, seed)
			plain, _, none, _ := simRun(d, base, 20*int64(period), false, 0, seed)
			if none != 0 {
				t.Fatalf("%v: %d extra reads with the lock off", period, none)
			}
			if len(arcs) < 18 || len(plain) < 18 {
				t.Fatalf("%v seed %d: %d and %d changes seen in 20 periods", period, seed, len(arcs), len(plain))
			}
			var w, pw []time.Duration
			for _, a := range arcs[2:] {
				w = append(w, time.Duration(a.width()))
			}
			for _, a := range plain[2:] {
				pw = append(pw, time.Duration(a.width()))
			}
			// Each change lies in its arc: the device's boundary.
			for _, a := range arcs {
				k := (a.hi - d.phase) / d.period
				if b := d.phase + k*d.period; b <= a.lo-d.readNs || b > a.hi {
					t.Errorf("%v: arc (%d, %d] misses the boundary %d", period, a.lo, a.hi, b)
				}
			}
			if lock.periodNs == 0 || max(lock.periodNs-int64(period), int64(period)-lock.periodNs) > int64(period)/200 {
				t.Errorf("%v seed %d: period learned %v", period, seed, time.Duration(lock.periodNs))
			}
			if m := median(w); m > 4*time.Millisecond || m*2 > median(pw) {
				t.Errorf("%v seed %d: changes known within %v (median) with the lock, %v without", period, seed, m, median(pw))
			}
			if most := baseReads/lockBudget + 2*lockBudget; extra > most {
				t.Errorf("%v seed %d: %d extra reads beside %d base ones, more than %d", period, seed, extra, baseReads, most)
			}
			t.Logf("%v seed %d: median arc %v locked, %v plain; %d extra reads beside %d", period, seed,
				median(w), median(pw), extra, baseReads)
		}
	}
}

// TestRefreshLockFewChanges: the lab's 2 s overshoot behind a 1 s
// refresh, three changes and nothing else: the third is known within 4
// ms (the first two show the period, each within 5 to 15 ms), and after the last change the
// extra reads stop within the horizon.
func TestRefreshLockFewChanges(t *testing.T) {
	const base = int64(10 * time.Millisecond)
	for seed := uint64(1); seed <= 10; seed++ {
		d := simDevice{period: int64(time.Second), phase: int64(seed) * 104729 * int64(time.Microsecond), readNs: 300_000,
			shows: func(k int64) bool { return k >= 3 && k <= 5 }}
		arcs, baseReads, extra, _ := simRun(d, base, 30*int64(time.Second), true, 0, seed)
		if len(arcs) != 3 {
			t.Fatalf("seed %d: %d changes, want 3", seed, len(arcs))
		}
		if w := arcs[2].width(); w > 4*int64(time.Millisecond) {
			t.Errorf("seed %d: the third change known within %v", seed, time.Duration(w))
		}
		// Windows after the last change: at most the horizon's.
		if most := (lockHorizon + 1) * int(time.Second/time.Duration(lockBudget*base)); extra > most {
			t.Errorf("seed %d: %d extra reads over 30 s beside %d base ones, more than %d", seed, extra, baseReads, most)
		}
	}
}

// TestRefreshLockOff: counters that change at every read, every 100 or
// 250 ms (a refresh short enough for the dithered reads), or at random
// get no window, or lose it: no period fits them.
func TestRefreshLockOff(t *testing.T) {
	const base = int64(10 * time.Millisecond)
	for _, period := range []time.Duration{time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		every := simDevice{period: int64(period), readNs: 200_000}
		if _, _, extra, lock := simRun(every, base, int64(2*time.Second), true, 0, 1); extra != 0 || lock.periodNs != 0 {
			t.Errorf("a counter changing every %v: %d extra reads, period %v", period, extra, time.Duration(lock.periodNs))
		}
	}
	// Changes at random instants, 400 ms apart on average: gaps that
	// share a period but by chance.
	r := rand.New(rand.NewPCG(9, 9))
	marks := map[int64]bool{}
	for k := int64(0); k < 31000; k++ {
		marks[k] = r.IntN(400) == 0
	}
	random := simDevice{period: int64(time.Millisecond), readNs: 200_000, shows: func(k int64) bool { return marks[k] }}
	_, baseReads, extra, _ := simRun(random, base, int64(30*time.Second), true, 0, 2)
	if extra > baseReads/lockBudget {
		t.Errorf("changes at random: %d extra reads beside %d base ones", extra, baseReads)
	}
	t.Logf("changes at random: %d extra reads beside %d base ones", extra, baseReads)
}

// refreshingSource publishes a counter that rises at every multiple of
// period on CLOCK_MONOTONIC.
type refreshingSource struct{ period int64 }

func (r refreshingSource) Read() (map[string]uint64, error) {
	return map[string]uint64{counters.PPSAllowanceExceeded: uint64(monoclock.Now() / r.period)}, nil
}

func (refreshingSource) Kind() string { return "lab" }

// TestSamplerLocksOntoRefresh: Sampler.Run with the lock, against a
// source that refreshes every 500 ms, read every 10 ms: the changes from
// the third on are known at least twice as finely as with the lock off,
// in one run of each (real timers: a ratio, not a time), and the extra
// reads stay within their budget.
func TestSamplerLocksOntoRefresh(t *testing.T) {
	const interval, period, run = 10 * time.Millisecond, 500 * time.Millisecond, 4 * time.Second
	arcsOf := func(unlocked bool) ([]time.Duration, int) {
		s, err := NewSampler("eth0", refreshingSource{int64(period)}, interval)
		if err != nil {
			t.Fatal(err)
		}
		s.unlocked = unlocked
		samples, _ := runFor(t, s, run)
		var w []time.Duration
		for i := 1; i < len(samples); i++ {
			a, b := samples[i-1], samples[i]
			if a.Err == "" && b.Err == "" && a.Values[counters.PPSAllowanceExceeded] != b.Values[counters.PPSAllowanceExceeded] {
				w = append(w, time.Duration(b.AfterNs-a.BeforeNs))
			}
		}
		if len(w) < 6 {
			t.Fatalf("%d changes in %v of a %v refresh", len(w), run, period)
		}
		return w[2:], len(samples)
	}
	locked, reads := arcsOf(false)
	plain, plainReads := arcsOf(true)
	t.Logf("median arc %v locked (%d reads), %v plain (%d reads)", median(locked), reads, median(plain), plainReads)
	if median(locked)*2 > median(plain) {
		t.Errorf("changes known within %v (median) with the lock, %v without", median(locked), median(plain))
	}
	if most := plainReads + plainReads/lockBudget + 2*lockBudget; reads > most {
		t.Errorf("%d reads with the lock, %d without: more than %d", reads, plainReads, most)
	}
}

// TestRefreshLockGiven: a refresh the user gives puts the window from the
// first change on. An incident behind a 1 s refresh that changes its
// counter twice: the second change is known within 4 ms, where without it
// the dithered reads know it within 5 to 15 ms. A given refresh that is
// off (the device's 1.004 s for 1 s, or 700 ms for 1 s) costs nothing but
// the extra reads of a window that missed: the changes show the device's
// period, each lies in its arc, and the changes from the fourth on are
// known as finely as without the given one; the extra reads stay within
// their budget.
func TestRefreshLockGiven(t *testing.T) {
	const base = int64(10 * time.Millisecond)
	second := time.Second.Nanoseconds()
	var seeded, plain []time.Duration
	for seed := uint64(1); seed <= 10; seed++ {
		d := simDevice{period: second, phase: int64(seed) * 104729 * int64(time.Microsecond), readNs: 300_000,
			shows: func(k int64) bool { return k == 3 || k == 4 }}
		arcs, _, _, _ := simRun(d, base, 8*second, true, second, seed)
		none, _, _, _ := simRun(d, base, 8*second, true, 0, seed)
		if len(arcs) != 2 || len(none) != 2 {
			t.Fatalf("seed %d: %d and %d changes, want 2", seed, len(arcs), len(none))
		}
		seeded, plain = append(seeded, time.Duration(arcs[1].width())), append(plain, time.Duration(none[1].width()))
		if w := arcs[1].width(); w > 4*int64(time.Millisecond) {
			t.Errorf("seed %d: the second change known within %v with the refresh given, %v without", seed, time.Duration(w), time.Duration(none[1].width()))
		}
	}
	t.Logf("the second change: median arc %v given, %v not", median(seeded), median(plain))
	if median(seeded)*2 > median(plain) {
		t.Errorf("the second change known within %v (median) given the refresh, %v not", median(seeded), median(plain))
	}
	for _, c := range []struct{ device, given time.Duration }{
		{1004 * time.Millisecond, time.Second},
		{700 * time.Millisecond, time.Second},
		{time.Second, 700 * time.Millisecond},
	} {
		for seed := uint64(1); seed <= 5; seed++ {
			d := simDevice{period: int64(c.device), phase: int64(seed) * 7919 * int64(time.Microsecond), readNs: 200_000}
			run := 20 * int64(c.device)
			arcs, baseReads, extra, lock := simRun(d, base, run, true, int64(c.given), seed)
			learned, _, _, _ := simRun(d, base, run, true, 0, seed)
			for _, a := range arcs {
				k := (a.hi - d.phase) / d.period
				if b := d.phase + k*d.period; b <= a.lo-d.readNs || b > a.hi {
					t.Errorf("device %v given %v: arc (%d, %d] misses the boundary %d", c.device, c.given, a.lo, a.hi, b)
				}
			}
			if lock.periodNs == 0 || max(lock.periodNs-int64(c.device), int64(c.device)-lock.periodNs) > int64(c.device)/200 {
				t.Errorf("device %v given %v seed %d: period learned %v", c.device, c.given, seed, time.Duration(lock.periodNs))
			}
			var w, lw []time.Duration
			for _, a := range arcs[3:] {
				w = append(w, time.Duration(a.width()))
			}
			for _, a := range learned[3:] {
				lw = append(lw, time.Duration(a.width()))
			}
			if m := median(w); m > 4*time.Millisecond {
				t.Errorf("device %v given %v seed %d: changes known within %v (median), %v with none given", c.device, c.given, seed, m, median(lw))
			}
			if most := baseReads/lockBudget + 2*lockBudget; extra > most {
				t.Errorf("device %v given %v seed %d: %d extra reads beside %d base ones, more than %d", c.device, c.given, seed, extra, baseReads, most)
			}
		}
	}
}
