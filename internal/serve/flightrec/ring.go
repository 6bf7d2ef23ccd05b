// Package flightrec is serve's flight recorder: a ring that keeps the last
// --history of what a streaming trace gathered (buckets, flows, window
// events, size slices, counter samples) within a memory bound, turns any
// span of it back into a record.Recording, and decides when an allowance
// counter's jump calls for a bundle (Trigger) and which old bundles go
// (Prune). It imports nothing Linux-only, so it is tested with plain data.
package flightrec

import (
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Chunk is what one interface's collector gathered over one drain, or one
// counter read (Counters only).
type Chunk struct {
	Interface string
	Series    []record.Series
	Sizes     []record.SizeSlice
	Flows     []record.FlowSnapshot
	Windows   []record.WindowEvent
	IMDS      []record.IMDSEvent
	// LinkLocalPayloads are the link-local payloads copied (DNS, IMDS
	// requests, NTP), for the link-local detail of a bundle's findings.
	LinkLocalPayloads []record.LinkLocalPayload
	Counters          []record.CounterSample
	// Totals and Loss are cumulative since attach; nil in a counter chunk.
	Totals []record.Totals
	Loss   *record.Loss
}

// Sizes of the records, for the memory estimate.
const (
	bucketBytes   = int64(unsafe.Sizeof(record.Bucket{}))
	flowBytes     = int64(unsafe.Sizeof(record.FlowSnapshot{}))
	windowBytes   = int64(unsafe.Sizeof(record.WindowEvent{}))
	imdsBytes     = int64(unsafe.Sizeof(record.IMDSEvent{}))
	payloadBytes  = int64(unsafe.Sizeof(record.LinkLocalPayload{}))
	sliceBytes    = int64(unsafe.Sizeof(record.SizeSlice{}))
	sampleBytes   = int64(unsafe.Sizeof(record.CounterSample{}))
	mapEntryBytes = 48 // a map[string]uint64 entry with its share of buckets, about
	chunkBytes    = int64(unsafe.Sizeof(entry{}))
	totalsBytes   = int64(unsafe.Sizeof(record.Totals{}))
	lossBytes     = int64(unsafe.Sizeof(record.Loss{}))
)

// bytes estimates the memory a chunk holds.
func (c *Chunk) bytes() int64 {
	n := chunkBytes
	for _, s := range c.Series {
		n += int64(len(s.Buckets)) * bucketBytes
	}
	n += int64(len(c.Totals))*totalsBytes + lossBytes
	n += int64(len(c.Sizes))*sliceBytes + int64(len(c.Flows))*flowBytes + int64(len(c.Windows))*windowBytes
	n += int64(len(c.IMDS)) * imdsBytes
	for _, p := range c.LinkLocalPayloads {
		n += payloadBytes + int64(cap(p.Data))
	}
	for _, s := range c.Counters {
		n += sampleBytes + int64(len(s.Values))*mapEntryBytes + int64(len(s.Err))
	}
	return n
}

type entry struct {
	atNs  int64 // when it was gathered, monotonic
	bytes int64
	chunk Chunk
}

// Ring keeps the chunks of the last History, at most MaxBytes of them
// (estimated). It is safe for concurrent use.
type Ring struct {
	history  int64
	maxBytes int64

	mu      sync.Mutex
	entries []entry // oldest first; a queue that shifts when half of it is dead
	head    int
	bytes   int64
	dropped uint64 // entries dropped for the memory bound before History
}

// NewRing makes a ring of the last history, holding at most maxBytes.
func NewRing(history time.Duration, maxBytes int64) *Ring {
	return &Ring{history: int64(history), maxBytes: maxBytes}
}

// Add takes in a chunk gathered at atNs and forgets what fell out of the
// history or the memory bound.
func (r *Ring) Add(atNs int64, c Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.empty() {
		r.expire(atNs)
		return
	}
	e := entry{atNs: atNs, bytes: c.bytes(), chunk: c}
	r.entries = append(r.entries, e)
	r.bytes += e.bytes
	r.expire(atNs)
}

func (c *Chunk) empty() bool {
	for _, s := range c.Series {
		if len(s.Buckets) > 0 {
			return false
		}
	}
	return len(c.Sizes)+len(c.Flows)+len(c.Windows)+len(c.IMDS)+len(c.LinkLocalPayloads)+len(c.Counters)+len(c.Totals) == 0 && c.Loss == nil
}

// expire drops entries older than the history, then the oldest while over
// the memory bound (counted: they were still within the history).
func (r *Ring) expire(nowNs int64) {
	for r.head < len(r.entries) {
		e := &r.entries[r.head]
		old := e.atNs < nowNs-r.history
		if !old && r.bytes <= r.maxBytes {
			break
		}
		if !old {
			r.dropped++
		}
		r.bytes -= e.bytes
		*e = entry{}
		r.head++
	}
	if r.head > len(r.entries)/2 {
		n := copy(r.entries, r.entries[r.head:])
		clear(r.entries[n:])
		r.entries = r.entries[:n]
		r.head = 0
	}
}

// Bytes is the memory the ring holds now, estimated.
func (r *Ring) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// MaxBytes is the bound.
func (r *Ring) MaxBytes() int64 { return r.maxBytes }

// Dropped is how many chunks the memory bound dropped before they left the
// history.
func (r *Ring) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// OldestNs is the time of the oldest chunk held, or 0.
func (r *Ring) OldestNs() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head < len(r.entries) {
		return r.entries[r.head].atNs
	}
	return 0
}

// Recording returns what the ring holds of interfaces ifaces (every one
// when nil) between fromNs and toNs as a recording: meta is the trace's,
// with Start and End set to the span (their wall times from end, a clock
// pair read at toNs or later). Buckets a drain swept again (stragglers)
// are added to their first part.
func (r *Ring) Recording(meta record.Meta, ifaces []string, fromNs, toNs int64, end record.ClockPair) *record.Recording {
	want := func(iface string) bool { return ifaces == nil || slices.Contains(ifaces, iface) }
	rec := &record.Recording{Meta: meta}
	rec.Meta.Start = record.ClockPair{MonoNs: fromNs, Wall: end.Wall.Add(-time.Duration(end.MonoNs - fromNs))}
	rec.Meta.End = record.ClockPair{MonoNs: toNs, Wall: end.Wall.Add(-time.Duration(end.MonoNs - toNs))}
	rec.Meta.Interfaces = slices.DeleteFunc(slices.Clone(meta.Interfaces), func(i record.InterfaceInfo) bool { return !want(i.Name) })
	in := func(ns int64) bool { return ns >= fromNs && ns < toNs }
	type sk struct {
		iface string
		dir   record.Direction
	}
	series := map[sk]*record.Series{}
	var order []sk
	// Totals and loss are cumulative: the span's are the last within it
	// less the last before it.
	type cum struct {
		totals []record.Totals
		loss   *record.Loss
	}
	before, last := map[string]cum{}, map[string]cum{}

	r.mu.Lock()
	for _, e := range r.entries[r.head:] {
		c := &e.chunk
		if !want(c.Interface) {
			continue
		}
		if c.Totals != nil || c.Loss != nil {
			switch {
			case e.atNs < fromNs:
				before[c.Interface] = cum{c.Totals, c.Loss}
			case e.atNs <= toNs:
				last[c.Interface] = cum{c.Totals, c.Loss}
			}
		}
		for _, s := range c.Series {
			k := sk{s.Interface, s.Direction}
			dst := series[k]
			if dst == nil {
				dst = &record.Series{Interface: s.Interface, Direction: s.Direction, WidthNs: s.WidthNs}
				series[k] = dst
				order = append(order, k)
			}
			dst.Buckets = appendIn(dst.Buckets, s.Buckets, in, func(b record.Bucket) int64 { return b.StartNs })
		}
		rec.Sizes = appendIn(rec.Sizes, c.Sizes, in, func(v record.SizeSlice) int64 { return v.StartNs })
		rec.Flows = appendIn(rec.Flows, c.Flows, in, func(v record.FlowSnapshot) int64 { return v.TimeNs })
		rec.Windows = appendIn(rec.Windows, c.Windows, in, func(v record.WindowEvent) int64 { return v.StartNs })
		rec.IMDS = appendIn(rec.IMDS, c.IMDS, in, func(v record.IMDSEvent) int64 { return v.TimeNs })
		rec.LinkLocalPayloads = appendIn(rec.LinkLocalPayloads, c.LinkLocalPayloads, in, func(v record.LinkLocalPayload) int64 { return v.TimeNs })
		rec.Counters = appendIn(rec.Counters, c.Counters, in, func(v record.CounterSample) int64 { return v.BeforeNs })
	}
	r.mu.Unlock()
	for _, m := range rec.Meta.Interfaces {
		b, l := before[m.Name], last[m.Name]
		for _, t := range l.totals {
			for _, bt := range b.totals {
				if bt.Direction == t.Direction {
					t = subTotals(t, bt)
				}
			}
			rec.Totals = append(rec.Totals, t)
		}
		if l.loss != nil {
			loss := *l.loss
			if b.loss != nil {
				loss = subLoss(loss, *b.loss)
			}
			rec.Loss = append(rec.Loss, loss)
		}
	}

	for _, k := range order {
		s := series[k]
		s.Buckets = mergeBuckets(s.Buckets)
		rec.Series = append(rec.Series, *s)
	}
	sort.SliceStable(rec.Windows, func(i, j int) bool { return rec.Windows[i].StartNs < rec.Windows[j].StartNs })
	sort.SliceStable(rec.IMDS, func(i, j int) bool { return rec.IMDS[i].TimeNs < rec.IMDS[j].TimeNs })
	sort.SliceStable(rec.LinkLocalPayloads, func(i, j int) bool { return rec.LinkLocalPayloads[i].TimeNs < rec.LinkLocalPayloads[j].TimeNs })
	sort.SliceStable(rec.Counters, func(i, j int) bool { return rec.Counters[i].BeforeNs < rec.Counters[j].BeforeNs })
	sort.SliceStable(rec.Sizes, func(i, j int) bool { return rec.Sizes[i].StartNs < rec.Sizes[j].StartNs })
	sort.SliceStable(rec.Flows, func(i, j int) bool { return rec.Flows[i].TimeNs < rec.Flows[j].TimeNs })
	return rec
}

// mergeBuckets sorts buckets by start and adds those of one start.
func mergeBuckets(bs []record.Bucket) []record.Bucket {
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].StartNs < bs[j].StartNs })
	out := bs[:0]
	for _, b := range bs {
		if n := len(out); n > 0 && out[n-1].StartNs == b.StartNs {
			t := &out[n-1]
			t.Packets += b.Packets
			t.Bytes += b.Bytes
			t.SYNs += b.SYNs
			for i := range t.LinkLocal {
				t.LinkLocal[i] += b.LinkLocal[i]
			}
			continue
		}
		out = append(out, b)
	}
	return out
}

func subTotals(a, b record.Totals) record.Totals {
	for i := range a.Packets {
		a.Packets[i] -= min(b.Packets[i], a.Packets[i])
		a.Bytes[i] -= min(b.Bytes[i], a.Bytes[i])
	}
	a.SYNs -= min(b.SYNs, a.SYNs)
	return a
}

func subLoss(a, b record.Loss) record.Loss {
	a.FlowMapFull -= min(b.FlowMapFull, a.FlowMapFull)
	a.RingbufFull -= min(b.RingbufFull, a.RingbufFull)
	a.BucketOverwritten -= min(b.BucketOverwritten, a.BucketOverwritten)
	a.SliceOverwritten -= min(b.SliceOverwritten, a.SliceOverwritten)
	a.FlowsEvicted -= min(b.FlowsEvicted, a.FlowsEvicted)
	return a
}

// appendIn appends to dst the items of src whose time is in the span.
func appendIn[T any](dst, src []T, in func(int64) bool, at func(T) int64) []T {
	for _, v := range src {
		if in(at(v)) {
			dst = append(dst, v)
		}
	}
	return dst
}
