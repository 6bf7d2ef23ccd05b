package record

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/knobs"
)

// Limits of what a recording may claim. A recording comes from a file that
// anyone may have edited, and the analyzer lays every series out densely
// over the trace's span, so a span must be justified by the data held: the
// floor covers a quiet trace of half an hour, every record held buys more.
const (
	maxBucketNs = int64(time.Second)
	// minGridCells is the span (in buckets, times the number of series)
	// any recording may have; cellsPerRecord how much more each record it
	// holds allows.
	minGridCells   = 1 << 24
	cellsPerRecord = 1 << 10
)

// Validate checks that a recording is consistent enough to analyze: positive
// widths, an end after the start, buckets in order, reads that end after
// they begin, and a span its data can justify. Its cost is linear in the
// data held, whatever the recording claims.
func Validate(r *Recording) error {
	m := &r.Meta
	bucketNs := r.BucketNs()
	for _, v := range []struct {
		name string
		ns   int64
	}{{"window", m.WindowNs}, {"size slice", m.SliceNs}, {"sample interval", m.SampleNs}} {
		if v.ns < 0 {
			return fmt.Errorf("meta: negative %s width %d ns", v.name, v.ns)
		}
	}
	if m.End.MonoNs < m.Start.MonoNs {
		return fmt.Errorf("meta: trace ends (%d ns) before it starts (%d ns)", m.End.MonoNs, m.Start.MonoNs)
	}
	if m.FlowLimitBps < 0 || math.IsNaN(m.FlowLimitBps) || math.IsInf(m.FlowLimitBps, 0) {
		return fmt.Errorf("meta: flow limit %v bit/s", m.FlowLimitBps)
	}
	if a := m.Analysis; a != nil {
		for _, l := range []Limit{a.BaselineBps, a.BurstBps, a.FlowLimitBps, a.LinkLocalPPS, a.PPSAllowance} {
			if l.Value < 0 || math.IsNaN(l.Value) || math.IsInf(l.Value, 0) {
				return fmt.Errorf("meta: analysis limit %v (%s) is not a finite number >= 0", l.Value, l.Source)
			}
		}
		if a.FineWindowNs < 0 || a.FineWindowNs > maxBucketNs*10 {
			return fmt.Errorf("meta: analysis fine window %d ns", a.FineWindowNs)
		}
	}
	lo, hi := m.Start.MonoNs, m.End.MonoNs
	records := len(r.Counters) + len(r.Flows) + len(r.Windows) + len(r.Sizes) + len(r.IMDS) + len(r.LinkLocalPayloads)
	type key struct {
		iface string
		dir   Direction
	}
	keys := map[key]bool{}
	for _, s := range r.Series {
		if s.Direction >= NumDirections {
			return fmt.Errorf("series %s: direction %d", s.Interface, s.Direction)
		}
		if s.WidthNs <= 0 || s.WidthNs > maxBucketNs {
			return fmt.Errorf("series %s %s: bucket width %d ns, want 1 ns to 1 s", s.Interface, s.Direction, s.WidthNs)
		}
		if s.WidthNs != bucketNs {
			return fmt.Errorf("series %s %s: bucket width %d ns, but the first series' is %d ns (one datapath makes them all)", s.Interface, s.Direction, s.WidthNs, bucketNs)
		}
		keys[key{s.Interface, s.Direction}] = true
		records += len(s.Buckets)
		if !slices.IsSortedFunc(s.Buckets, func(a, b Bucket) int { return cmpInt64(a.StartNs, b.StartNs) }) {
			return fmt.Errorf("series %s %s: buckets out of time order", s.Interface, s.Direction)
		}
		if n := len(s.Buckets); n > 0 {
			lo = min(lo, s.Buckets[0].StartNs)
			last := s.Buckets[n-1].StartNs
			if last > math.MaxInt64-s.WidthNs {
				return fmt.Errorf("series %s %s: bucket at %d ns", s.Interface, s.Direction, last)
			}
			hi = max(hi, last+s.WidthNs)
		}
	}
	for _, w := range r.Windows {
		if w.WidthNs <= 0 || w.Direction >= NumDirections {
			return fmt.Errorf("window event of %s: width %d ns, direction %d", w.Interface, w.WidthNs, w.Direction)
		}
	}
	for _, e := range r.IMDS {
		if e.Direction >= NumDirections || e.Kind < IMDSTokenRequest || e.Kind > IMDSTimeExceeded || e.Key.Proto != 6 {
			return fmt.Errorf("imds event of %s: direction %d, kind %d, protocol %d (want a known kind of a tcp flow)",
				e.Interface, e.Direction, e.Kind, e.Key.Proto)
		}
		lo, hi = min(lo, e.TimeNs), max(hi, e.TimeNs)
	}
	for _, e := range r.LinkLocalPayloads {
		if e.Direction >= NumDirections || e.Service.Index() < 0 || len(e.Data) > LinkLocalPayloadBytes || len(e.Data) > int(e.Len) {
			return fmt.Errorf("link-local payload of %s: direction %d, service %d, %d of %d bytes (want a known service, at most %d bytes of the payload)",
				e.Interface, e.Direction, e.Service, len(e.Data), e.Len, LinkLocalPayloadBytes)
		}
		lo, hi = min(lo, e.TimeNs), max(hi, e.TimeNs)
	}
	for _, s := range r.Sizes {
		if s.WidthNs <= 0 || s.Direction >= NumDirections {
			return fmt.Errorf("size slice of %s: width %d ns, direction %d", s.Interface, s.WidthNs, s.Direction)
		}
	}
	reads := map[string][]CounterSample{}
	for _, c := range r.Counters {
		if c.AfterNs < c.BeforeNs {
			return fmt.Errorf("counter read of %s ends (%d ns) before it begins (%d ns)", c.Interface, c.AfterNs, c.BeforeNs)
		}
		reads[c.Interface] = append(reads[c.Interface], c)
	}
	// An interface's counters are read one read after another: a read that
	// begins before the one before it ended is no read of this tool's, and
	// a change between the two would span backwards.
	for iface, rs := range reads {
		slices.SortFunc(rs, func(x, y CounterSample) int { return cmp.Compare(x.BeforeNs, y.BeforeNs) })
		for k := 1; k < len(rs); k++ {
			if rs[k].BeforeNs < rs[k-1].AfterNs {
				return fmt.Errorf("counter reads of %s overlap: one begins at %d ns, before the one before it ended (%d ns)", iface, rs[k].BeforeNs, rs[k-1].AfterNs)
			}
		}
	}
	for _, t := range r.Totals {
		if t.Direction >= NumDirections {
			return fmt.Errorf("totals of %s: direction %d", t.Interface, t.Direction)
		}
	}
	// The span in buckets, checked without overflow: hi-lo can exceed int64.
	span := uint64(hi) - uint64(lo)
	cells := span / uint64(r.GridBucketNs())
	series := uint64(max(len(keys), 1))
	allowed := uint64(max(minGridCells, records*cellsPerRecord))
	if cells > allowed/series {
		return fmt.Errorf("the recording spans %.0f s in %d ns buckets over %d series but holds only %d records: "+
			"its clock readings are not plausible", float64(span)/1e9, r.GridBucketNs(), series, records)
	}
	return nil
}

// GridBucketNs is the bucket width an analysis lays the recording out
// with: its own, or without series (no bucket to go by) a trace's default,
// which bounds the grid as Validate does.
func (r *Recording) GridBucketNs() int64 {
	if b := r.BucketNs(); b > 0 {
		return b
	}
	return int64(knobs.DefaultBucket)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// errNoMeta is a recording whose meta is missing or null.
var errNoMeta = errors.New("no meta: the recording says nothing about how it was traced")
