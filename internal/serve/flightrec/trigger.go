package flightrec

import (
	"slices"
	"sort"
	"time"
)

// Incident is a span of one interface that calls for a bundle: from the
// first jump of an allowance counter, recorded until After past the last.
type Incident struct {
	Interface string
	FirstNs   int64    // the first jump (the read that saw it)
	UntilNs   int64    // when recording it ends: After past the last jump
	Counters  []string // the counters that jumped, sorted
}

// Trigger turns counter jumps into incidents, at most one per MinGap per
// interface. It is not safe for concurrent use.
type Trigger struct {
	After  time.Duration
	MinGap time.Duration
	// MaxSpan caps an incident: its recording ends at most MaxSpan after
	// its first jump however long the jumps go on (a counter that keeps
	// moving would hold the bundle back for ever, and the ring keeps only
	// so much). 0 is no cap.
	MaxSpan time.Duration

	open      map[string]*Incident
	lastFirst map[string]int64 // first jump of the last incident opened, per interface
	// Suppressed counts incidents not opened for MinGap.
	Suppressed int
	quiet      map[string]int64 // a suppressed incident's last jump, so one run of jumps counts once
}

// Jump tells the trigger that counter name of iface jumped in the read
// that began at atNs. It returns whether it opened a new incident.
func (t *Trigger) Jump(iface, name string, atNs int64) bool {
	if t.open == nil {
		t.open, t.lastFirst, t.quiet = map[string]*Incident{}, map[string]int64{}, map[string]int64{}
	}
	if in := t.open[iface]; in != nil {
		in.UntilNs = max(in.UntilNs, atNs+int64(t.After))
		if t.MaxSpan > 0 {
			in.UntilNs = min(in.UntilNs, in.FirstNs+int64(max(t.MaxSpan, t.After)))
		}
		if !slices.Contains(in.Counters, name) {
			in.Counters = append(in.Counters, name)
			sort.Strings(in.Counters)
		}
		return false
	}
	if last, ok := t.lastFirst[iface]; ok && atNs-last < int64(t.MinGap) {
		if q, ok := t.quiet[iface]; !ok || atNs-q > int64(t.After) {
			t.Suppressed++
		}
		t.quiet[iface] = atNs
		return false
	}
	t.open[iface] = &Incident{Interface: iface, FirstNs: atNs, UntilNs: atNs + int64(t.After), Counters: []string{name}}
	t.lastFirst[iface] = atNs
	return true
}

// Due returns the incidents whose recording ended by nowNs (all of them
// when flush), and forgets them.
func (t *Trigger) Due(nowNs int64, flush bool) []Incident {
	var out []Incident
	for iface, in := range t.open {
		if flush || in.UntilNs <= nowNs {
			out = append(out, *in)
			delete(t.open, iface)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstNs < out[j].FirstNs })
	return out
}
