package ena

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Guard is the part of Backoff that keeps reads from pushing a struggling
// device toward a reset. Each ETHTOOL_GSTATS read runs under the kernel's
// RTNL lock and, on ENA, waits for one or two admin commands; a command
// that times out (3 s) closes the admin queue and the driver resets the
// device. The driver's own health counters come back in the same read at no
// cost (HealthCounters): when one of them moves, or reads slow down (one
// read over SlowRead, or the median of the last Window reads MedianFactor
// times that of the run's first Window and over MedianFloor), the sampler
// backs off at once to ten times the interval in use, Interval at least,
// and never reads faster again in the run; at
// the StopAfter-th such sign it stops reading for the rest of the run. The
// trace goes on either way, and the report says what happened. The zero
// Guard watches nothing.
type Guard struct {
	SlowRead     time.Duration
	MedianFactor float64
	MedianFloor  time.Duration
	Window       int
	Interval     time.Duration
	StopAfter    int
}

// DefaultGuard is what trace and serve use. 50 ms is far above any healthy
// read (tens to hundreds of µs on ENA, counters.Latency shows it) and far
// below the 3 s admin timeout; a median 5 times the run's own baseline is
// not CPU contention alone, and under 2 ms the lock is held too briefly to
// matter. One read a second once backed off is what the CloudWatch agent's
// finest setting reads; three signs and the device is left alone.
var DefaultGuard = Guard{
	SlowRead: 50 * time.Millisecond, MedianFactor: 5, MedianFloor: 2 * time.Millisecond,
	Window: 50, Interval: time.Second, StopAfter: 3,
}

// HealthCounters are the ENA driver's health counters that move when its
// admin queue or the device struggles (amzn-drivers ena_ethtool.c).
var HealthCounters = []string{
	"ena_admin_q_no_completion", "ena_admin_q_out_of_space", "admin_q_pause",
	"wd_expired", "missing_tx_cmpl", "device_request_reset", "interface_down",
}

// GuardStatus is what a guard did so far.
type GuardStatus struct {
	State  string // "reading", or the last event's action (record.CounterGuard*)
	Events []record.CounterGuardEvent
	Reads  int
	ReadNs int64 // the reads' durations summed: how long they held RTNL in all
}

// guardState follows one sampler's reads.
type guardState struct {
	g Guard

	mu       sync.Mutex
	last     map[string]uint64 // health counters of the last successful read
	baseline time.Duration     // median of the first Window reads; 0 until known
	recent   []time.Duration   // the reads since the baseline or the last sign
	status   GuardStatus
}

func newGuardState(g Guard) *guardState {
	return &guardState{g: g, status: GuardStatus{State: "reading"}}
}

// forSource is the guard for reads of src: the slow-read signs only where
// a read reaches a device (the ethtool source). A file's or a lab's read
// time says nothing of a device, and on a busy machine is mostly the wait
// for a CPU; their health counters are still watched.
func (g Guard) forSource(src Source) Guard {
	if src.Kind() != "ethtool" {
		g.SlowRead, g.MedianFactor = 0, 0
	}
	return g
}

// on reports whether the guard watches anything.
func (g Guard) on() bool { return g.SlowRead > 0 || g.MedianFactor > 0 || g.StopAfter > 0 }

// backOffFactor is how much longer the interval gets at each sign.
const backOffFactor = 10

// observe takes one read made at interval cur and says what to do: go on
// at interval backOff (0: as before), or stop.
func (gs *guardState) observe(cs record.CounterSample, cur time.Duration) (backOff time.Duration, stop bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	took := time.Duration(cs.AfterNs - cs.BeforeNs)
	gs.status.Reads++
	gs.status.ReadNs += int64(took)
	if gs.status.State == record.CounterGuardStopped {
		return 0, true
	}
	if !gs.g.on() {
		return 0, false
	}
	var signs []string
	if cs.Err == "" {
		for _, name := range HealthCounters {
			v, ok := cs.Values[name]
			if was, seen := gs.last[name]; ok && seen && v > was {
				signs = append(signs, fmt.Sprintf("%s +%d", name, v-was))
			}
		}
		if gs.last == nil {
			gs.last = make(map[string]uint64, len(HealthCounters))
		}
		for _, name := range HealthCounters {
			if v, ok := cs.Values[name]; ok {
				gs.last[name] = v
			}
		}
	}
	if gs.g.SlowRead > 0 && took > gs.g.SlowRead {
		signs = append(signs, fmt.Sprintf("a read took %s (over %s)", took.Round(time.Microsecond), gs.g.SlowRead))
	}
	if s := gs.medianSign(took); s != "" {
		signs = append(signs, s)
	}
	if len(signs) == 0 {
		return 0, false
	}
	gs.recent = gs.recent[:0] // one slow period is one sign
	ev := record.CounterGuardEvent{Interface: cs.Interface, AtNs: cs.AfterNs, Reason: strings.Join(signs, "; "), Action: record.CounterGuardBackedOff,
		IntervalNs: int64(max(gs.g.Interval, backOffFactor*cur))}
	if gs.g.StopAfter > 0 && len(gs.status.Events)+1 >= gs.g.StopAfter {
		ev.Action, ev.IntervalNs = record.CounterGuardStopped, 0
	}
	gs.status.Events = append(gs.status.Events, ev)
	gs.status.State = ev.Action
	return time.Duration(ev.IntervalNs), ev.Action == record.CounterGuardStopped
}

// medianSign adds took to the reads' window and names the slowdown when
// the window's median is far above the baseline.
func (gs *guardState) medianSign(took time.Duration) string {
	if gs.g.MedianFactor <= 0 || gs.g.Window <= 0 {
		return ""
	}
	gs.recent = append(gs.recent, took)
	if len(gs.recent) < gs.g.Window {
		return ""
	}
	m := median(gs.recent)
	gs.recent = gs.recent[:0]
	if gs.baseline == 0 {
		gs.baseline = max(m, 1)
		return ""
	}
	if m < gs.g.MedianFloor || float64(m) < gs.g.MedianFactor*float64(gs.baseline) {
		return ""
	}
	return fmt.Sprintf("median read %s over the last %d, %.0fx the run's first %d (%s)",
		m.Round(time.Microsecond), gs.g.Window, float64(m)/float64(gs.baseline), gs.g.Window, gs.baseline.Round(time.Microsecond))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// snapshot copies the status.
func (gs *guardState) snapshot() GuardStatus {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	st := gs.status
	st.Events = slices.Clone(st.Events)
	return st
}

// Guarded is what the sampler's guard did so far; safe while Run runs.
func (s *Sampler) Guarded() GuardStatus {
	if s.guard == nil {
		return GuardStatus{State: "reading"}
	}
	return s.guard.snapshot()
}
