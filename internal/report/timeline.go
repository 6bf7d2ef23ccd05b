package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
)

// timeline builds the time charts of the HTML report from the recording's
// bucket series and counter samples.
type timeline struct {
	rec      *record.Recording
	res      *analyzer.Result
	startNs  int64 // trace start, monotonic
	endNs    int64
	changes  counters.Changes
	findings []analyzer.Finding // ranked: #1 is findings[0]
}

func newTimeline(rec *record.Recording, res *analyzer.Result) *timeline {
	tl := &timeline{rec: rec, res: res, startNs: rec.Meta.Start.MonoNs, endNs: rec.Meta.End.MonoNs,
		changes: counters.Diff(rec.Counters), findings: rankedFindings(res)}
	if tl.endNs <= tl.startNs { // no end recorded: up to the last bucket
		for _, s := range rec.Series {
			if n := len(s.Buckets); n > 0 {
				tl.endNs = max(tl.endNs, s.Buckets[n-1].StartNs+s.WidthNs)
			}
		}
	}
	return tl
}

func (tl *timeline) seconds(ns int64) float64 { return float64(ns-tl.startNs) / 1e9 }
func (tl *timeline) mono(s float64) int64     { return tl.startNs + int64(math.Round(s*1e9)) }

// series returns the bucket series of one interface and direction.
func (tl *timeline) series(iface string, dir record.Direction) (record.Series, bool) {
	for _, s := range tl.rec.Series {
		if s.Interface == iface && s.Direction == dir {
			return s, true
		}
	}
	return record.Series{}, false
}

// bucketMetric is what a chart plots of a bucket, per second.
type bucketMetric struct {
	unit  string
	value func(b *record.Bucket) float64
}

var (
	metricBits    = bucketMetric{"bps", func(b *record.Bucket) float64 { return 8 * float64(b.Bytes) }}
	metricPackets = bucketMetric{"pps", func(b *record.Bucket) float64 { return float64(b.Packets) }}
	metricSYNs    = bucketMetric{"SYN/s", func(b *record.Bucket) float64 { return float64(b.SYNs) }}
)

func metricLinkLocal(service int) bucketMetric { // -1: every service
	return bucketMetric{"pps", func(b *record.Bucket) float64 {
		if service >= 0 {
			return float64(b.LinkLocal[service])
		}
		var s uint64
		for _, v := range b.LinkLocal {
			s += v
		}
		return float64(s)
	}}
}

// columns reduces the buckets in [fromNs, toNs) to at most maxCols values.
// The buckets are summed into slots of slotNs and each slot becomes a rate
// per second; when there are more slots than columns, a column keeps the
// highest slot it covers. Max, not mean: a 1 ms burst in a column of 30 ms
// must stay as high as it was. fromNs must be on the slot grid.
func columns(buckets []record.Bucket, fromNs, toNs, slotNs int64, maxCols int, m bucketMetric) []float64 {
	slots := (toNs - fromNs + slotNs - 1) / slotNs
	n := int(min(slots, int64(maxCols)))
	cols := make([]float64, max(n, 1))
	colOf := func(slot int64) int { return int(slot * int64(n) / slots) }
	i := sort.Search(len(buckets), func(i int) bool { return buckets[i].StartNs >= fromNs })
	cur, sum := int64(-1), 0.0
	flush := func() {
		if cur >= 0 && cur < slots {
			c := colOf(cur)
			cols[c] = math.Max(cols[c], sum*1e9/float64(slotNs))
		}
	}
	for ; i < len(buckets) && buckets[i].StartNs < toNs; i++ {
		slot := (buckets[i].StartNs - fromNs) / slotNs
		if slot != cur {
			flush()
			cur, sum = slot, 0
		}
		sum += m.value(&buckets[i])
	}
	flush()
	return cols
}

// sumBuckets merges two sorted bucket lists, adding buckets that start at
// the same instant (ingress + egress, for the bidirectional pps allowance).
func sumBuckets(a, b []record.Bucket) []record.Bucket {
	out := make([]record.Bucket, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].StartNs < b[j].StartNs:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].StartNs < a[i].StartNs:
			out = append(out, b[j])
			j++
		default:
			s := a[i]
			s.Packets += b[j].Packets
			s.Bytes += b[j].Bytes
			s.SYNs += b[j].SYNs
			for k := range s.LinkLocal {
				s.LinkLocal[k] += b[j].LinkLocal[k]
			}
			out = append(out, s)
			i, j = i+1, j+1
		}
	}
	return out
}

// window is the stretch a chart covers, aligned to its slot grid.
type window struct {
	fromNs, toNs, slotNs int64
}

func (tl *timeline) window(fromNs, toNs, slotNs int64) window {
	fromNs = max(fromNs, tl.startNs)
	toNs = min(toNs, tl.endNs)
	fromNs -= ((fromNs % slotNs) + slotNs) % slotNs
	return window{fromNs, max(toNs, fromNs+slotNs), slotNs}
}

func (w window) slots() int64 { return (w.toNs - w.fromNs + w.slotNs - 1) / w.slotNs }

// resolutionText says how the window's slots were drawn.
func (w window) resolutionText(what string) string {
	n := w.slots()
	if n <= plotWidth {
		return fmt.Sprintf("%s at full resolution: one column per %s (%s of them).", what,
			fmtSeconds(float64(w.slotNs)/1e9), fmtCount(uint64(n)))
	}
	return fmt.Sprintf("%s: %s slots of %s drawn in %d columns, each column showing the highest slot it "+
		"covers (max, not mean), so that short bursts stay visible.", what, fmtCount(uint64(n)),
		fmtSeconds(float64(w.slotNs)/1e9), plotWidth)
}

var directions = []record.Direction{record.Ingress, record.Egress}

// directionSeries returns a chart series per direction of an interface
// (dirs nil: both).
func (tl *timeline) directionSeries(iface string, dirs []record.Direction, w window, m bucketMetric) []chartSeries {
	if dirs == nil {
		dirs = directions
	}
	var out []chartSeries
	for _, d := range dirs {
		s, ok := tl.series(iface, d)
		if !ok {
			continue
		}
		out = append(out, chartSeries{Name: d.String(), Class: d.String(),
			Values: columns(s.Buckets, w.fromNs, w.toNs, w.slotNs, plotWidth, m)})
	}
	return out
}

// bucketNs is the width of the recorded buckets.
func (tl *timeline) bucketNs() int64 { return tl.rec.GridBucketNs() }

// shortCounter is a counter's name as a chart label: bw_out for
// bw_out_allowance_exceeded.
func shortCounter(name string) string {
	return strings.TrimSuffix(strings.TrimSuffix(name, "_allowance_exceeded"), "_allowance_available")
}

// markers are the counter events of an interface in [fromNs, toNs): jumps
// of the named counters, resets, failed reads.
func (tl *timeline) markers(iface string, names []string, fromNs, toNs int64) []chartSpan {
	var out []chartSpan
	overlaps := func(a, b int64) bool { return a < toNs && b > fromNs }
	for _, j := range tl.changes.Jumps {
		if j.Interface != iface || j.Delta == 0 || !slices.Contains(names, j.Name) || !overlaps(j.FromNs, j.ToNs) {
			continue
		}
		out = append(out, chartSpan{From: tl.seconds(j.FromNs), To: tl.seconds(j.ToNs), Class: "jump",
			Label: shortCounter(j.Name) + " +" + fmtCount(j.Delta),
			Title: fmt.Sprintf("%s rose by %s between the reads at %s and %s", j.Name, fmtCount(j.Delta),
				fmtOffset(tl.seconds(j.FromNs)), fmtOffset(tl.seconds(j.ToNs)))})
	}
	for _, r := range tl.changes.Resets {
		if r.Interface != iface || !slices.Contains(names, r.Name) || !overlaps(r.FromNs, r.ToNs) {
			continue
		}
		out = append(out, chartSpan{From: tl.seconds(r.FromNs), To: tl.seconds(r.ToNs), Class: "reset",
			Label: "reset " + shortCounter(r.Name),
			Title: fmt.Sprintf("%s went down from %s to %s: a driver reset, not negative traffic", r.Name,
				fmtCount(r.From), fmtCount(r.To))})
	}
	for _, f := range tl.changes.Failed {
		if f.Interface != iface || !overlaps(f.BeforeNs, f.AfterNs+1) {
			continue
		}
		out = append(out, chartSpan{From: tl.seconds(f.BeforeNs), To: tl.seconds(f.AfterNs), Class: "failed",
			Label: "read failed", Title: "counter read failed: " + f.Reason})
	}
	slices.SortStableFunc(out, func(a, b chartSpan) int { return cmp.Compare(a.From, b.From) })
	return out
}

// isENA tells whether the interface has allowance counters.
func (tl *timeline) isENA(iface string) bool {
	for _, e := range tl.res.Trace.ENA {
		if e.Interface == iface {
			return e.ENA
		}
	}
	return false
}

func (tl *timeline) bandwidthLimits() []chartLimit {
	l := tl.res.Trace.Limits
	var out []chartLimit
	if l.BurstBps.Known && l.BaselineBps.Known && l.BurstBps.Value == l.BaselineBps.Value {
		// One line, one label: two would be drawn over each other.
		return []chartLimit{{Y: l.BaselineBps.Value, Label: "baseline = burst allowance " + fmtBps(l.BaselineBps.Value)}}
	}
	if l.BurstBps.Known {
		out = append(out, chartLimit{Y: l.BurstBps.Value, Label: "burst allowance " + fmtBps(l.BurstBps.Value)})
	}
	if l.BaselineBps.Known {
		out = append(out, chartLimit{Y: l.BaselineBps.Value, Label: "baseline " + fmtBps(l.BaselineBps.Value)})
	}
	return out
}

// findingWindows are the findings of an interface, as labelled spans.
func (tl *timeline) findingWindows(iface string) []chartSpan {
	var out []chartSpan
	for i, f := range tl.findings {
		if f.Interface != iface {
			continue
		}
		out = append(out, chartSpan{From: f.StartOffsetS, To: f.EndOffsetS, Class: f.Severity,
			Label: fmt.Sprintf("#%d", i+1), Title: fmt.Sprintf("#%d %s %s: %s", i+1, f.Severity, f.Kind, f.Summary)})
	}
	return out
}

// offScaleText names the limits a chart left out.
func offScaleText(c *lineChart) string {
	_, off := c.splitLimits()
	if len(off) == 0 {
		return ""
	}
	var names []string
	for _, l := range off {
		names = append(names, l.Label)
	}
	return " Off the scale, not drawn: " + strings.Join(names, ", ") + "."
}
