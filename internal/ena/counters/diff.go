package counters

import (
	"sort"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Key names one counter of one interface.
type Key struct {
	Interface string
	Name      string
}

// Jump is the increase of a cumulative counter between two successful reads.
// It happened in (FromNs, ToNs]: after the earlier read ended and before the
// later one began (record.CounterSample).
type Jump struct {
	Interface string
	Name      string
	FromNs    int64
	ToNs      int64
	Delta     uint64
}

// Reset is a cumulative counter that went down between two successful reads,
// in (FromNs, ToNs]: a driver or device reset, never negative traffic. What
// was counted between the reset and the later read is unknown, so no jump is
// derived from it; the next jump is measured from To.
type Reset struct {
	Interface string
	Name      string
	FromNs    int64
	ToNs      int64
	From      uint64 // value at the earlier read
	To        uint64 // value at the later read, below From
}

// FailedRead is a read that was skipped: its values, if any, were not used.
type FailedRead struct {
	Interface string
	BeforeNs  int64
	AfterNs   int64
	Reason    string
}

// ReasonAllZero is the FailedRead.Reason of a read whose device counters were
// all zero right after a read where a cumulative one (or more than one gauge)
// was not: that is how the ENA driver reports a failed admin command (it
// returns zeros, not an error). A lone gauge reaching zero is a good read.
const ReasonAllZero = "device counters all zero after nonzero values: failed admin command"

// GaugeValue is one successful read of a gauge.
type GaugeValue struct {
	Interface string
	Name      string
	BeforeNs  int64
	AfterNs   int64
	Value     uint64
}

// Changes is what a series of counter samples says happened. Every slice is
// in time order; events of one read are in name order.
type Changes struct {
	Jumps  []Jump
	Resets []Reset
	Failed []FailedRead
	Gauges []GaugeValue
	// Totals is the sum of the jumps of every cumulative counter that at
	// least one successful read held, so a counter that never moved is 0
	// and an absent one is no key. After a reset it is a lower bound.
	Totals map[Key]uint64
}

// JumpsOf returns the jumps of one counter name, on every interface.
func (c Changes) JumpsOf(name string) []Jump {
	var out []Jump
	for _, j := range c.Jumps {
		if j.Name == name {
			out = append(out, j)
		}
	}
	return out
}

// Diff turns counter samples into changes. Samples of several interfaces may
// be mixed: each interface is followed on its own. Samples are taken in
// BeforeNs order whatever their order in the slice.
//
// A cumulative counter is compared with its value at the last successful read
// that held it, so a counter missing from some reads still gets a jump, over
// a wider interval. Failed reads (Err set, or ReasonAllZero) are reported and
// skipped. Gauges are reported value by value, never as deltas.
func Diff(samples []record.CounterSample) Changes {
	order := make([]int, len(samples))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return samples[order[a]].BeforeNs < samples[order[b]].BeforeNs
	})

	ch := Changes{Totals: make(map[Key]uint64)}
	states := make(map[string]*interfaceState)
	for _, i := range order {
		s := &samples[i]
		st := states[s.Interface]
		if st == nil {
			st = &interfaceState{last: make(map[string]reading)}
			states[s.Interface] = st
		}
		if reason, failed := st.failure(s); failed {
			ch.Failed = append(ch.Failed, FailedRead{
				Interface: s.Interface, BeforeNs: s.BeforeNs, AfterNs: s.AfterNs, Reason: reason,
			})
			continue
		}
		ch.add(st, s)
	}
	return ch
}

// reading is a counter's value at the last successful read that held it.
type reading struct {
	value   uint64
	afterNs int64
}

type interfaceState struct {
	last map[string]reading
	// lastNonzero is what was nonzero at the last successful read that had
	// something to check (see nonzeroAt).
	lastNonzero nonzero
}

// failure tells whether a sample is a failed read, and why.
func (st *interfaceState) failure(s *record.CounterSample) (string, bool) {
	if s.Err != "" {
		return s.Err, true
	}
	now, checked := nonzeroAt(s.Values)
	if !checked || !now.none() || !st.lastNonzero.vanishing() {
		return "", false
	}
	// A genuine reset also zeroes the counters; total_resets (2.10.0+)
	// tells one from a failed read when the driver has it.
	if now, ok := s.Values[TotalResets]; ok {
		if prev, ok := st.last[TotalResets]; ok && now > prev.value {
			return "", false
		}
	}
	return ReasonAllZero, true
}

// nonzero counts the nonzero counters of one read, cumulative and gauges
// apart.
type nonzero struct {
	cumulative, gauges int
}

func (n nonzero) none() bool { return n.cumulative == 0 && n.gauges == 0 }

// vanishing tells whether this read's nonzero counters all reading zero at
// the next read says the read failed. A cumulative counter never goes back
// to zero but by a reset (which total_resets tells apart), so one is enough.
// A single gauge does reach zero on its own: conntrack_allowance_available
// does when the table fills, before any *_exceeded moves (the device's
// counters lag). Two gauges zeroed at once (the SRD mode with it) are the
// admin command's zeros again.
func (n nonzero) vanishing() bool { return n.cumulative > 0 || n.gauges > 1 }

// nonzeroAt counts what is nonzero in a read. It looks at the device
// counters when the read has any, since the driver's own counters (queues,
// resets) stay right when the admin command fails; otherwise at every value.
// checked is false for a read with nothing to look at.
func nonzeroAt(values map[string]uint64) (n nonzero, checked bool) {
	count := func(name string, v uint64) {
		checked = true
		switch {
		case v == 0:
		case IsGauge(name):
			n.gauges++
		default:
			n.cumulative++
		}
	}
	for _, name := range DeviceCounters {
		if v, ok := values[name]; ok {
			count(name, v)
		}
	}
	if checked {
		return n, true
	}
	for name, v := range values {
		count(name, v)
	}
	return n, checked
}

// add takes in one successful read.
func (c *Changes) add(st *interfaceState, s *record.CounterSample) {
	names := make([]string, 0, len(s.Values))
	for name := range s.Values {
		names = append(names, name)
	}
	sort.Strings(names)

	for _, name := range names {
		v := s.Values[name]
		if IsGauge(name) {
			c.Gauges = append(c.Gauges, GaugeValue{
				Interface: s.Interface, Name: name, BeforeNs: s.BeforeNs, AfterNs: s.AfterNs, Value: v,
			})
			continue
		}
		key := Key{Interface: s.Interface, Name: name}
		if _, ok := c.Totals[key]; !ok {
			c.Totals[key] = 0
		}
		if prev, ok := st.last[name]; ok {
			switch {
			case v > prev.value:
				c.Jumps = append(c.Jumps, Jump{
					Interface: s.Interface, Name: name, FromNs: prev.afterNs, ToNs: s.BeforeNs, Delta: v - prev.value,
				})
				c.Totals[key] += v - prev.value
			case v < prev.value:
				c.Resets = append(c.Resets, Reset{
					Interface: s.Interface, Name: name, FromNs: prev.afterNs, ToNs: s.BeforeNs, From: prev.value, To: v,
				})
			}
		}
		st.last[name] = reading{value: v, afterNs: s.AfterNs}
	}
	if n, checked := nonzeroAt(s.Values); checked {
		st.lastNonzero = n
	}
}
