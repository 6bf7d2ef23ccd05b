package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Rows of the tables the text and HTML reports share. The first cells are
// names, the rest numbers (right-aligned).

// totalsRows: interface, direction, packets, bytes, SYNs, then packets per
// protocol class.
func totalsRows(totals []analyzer.Total) (header []string, rows [][]string) {
	header = []string{"IFACE", "DIR", "PACKETS", "BYTES", "SYNS"}
	for c := range record.Class(record.NumClasses) {
		header = append(header, strings.ToUpper(c.String()))
	}
	for _, tot := range totals {
		row := []string{tot.Interface, tot.Direction, fmtCount(tot.Packets), fmtBytes(float64(tot.Bytes)), fmtCount(tot.SYNs)}
		for c := range record.Class(record.NumClasses) {
			v := uint64(0)
			for _, ct := range tot.Classes {
				if ct.Class == c.String() {
					v = ct.Packets
				}
			}
			row = append(row, fmtCount(v))
		}
		rows = append(rows, row)
	}
	return header, rows
}

const partialNote = "* trace shorter than the window or period: the value is the average over the whole trace."

// rateRows: two rows per interface and direction (bits/s, packets/s) with
// the 1 ms, 100 ms and 1 s peaks and the 1-minute and 5-minute averages.
// partial: some value is marked * (see partialNote).
func rateRows(rates []analyzer.RateProfile) (header []string, rows [][]string, partial bool) {
	header = []string{"IFACE", "DIR", "", "1 ms PEAK", "100 ms PEAK", "1 s PEAK", "1-min AVG", "5-min AVG"}
	for _, r := range rates {
		bps := []string{r.Interface, r.Direction, "bits/s"}
		pps := []string{"", "", "packets/s"}
		add := func(vb, vp float64, ok, part bool) {
			if !ok {
				bps, pps = append(bps, "-"), append(pps, "-")
				return
			}
			mark := ""
			if part {
				mark, partial = "*", true
			}
			bps, pps = append(bps, fmtBps(vb)+mark), append(pps, fmtPPS(vp)+mark)
		}
		for _, w := range []float64{0.001, 0.1, 1} {
			pk, ok := peakAt(r, w)
			add(pk.Bps, pk.PPS, ok, pk.Partial)
		}
		for _, per := range []float64{60, 300} {
			a, ok := averageOf(r, per)
			add(a.Bps, a.PPS, ok, a.Partial)
		}
		rows = append(rows, bps, pps)
	}
	return header, rows, partial
}

// lossSentence says plainly whether the trace lost anything.
func lossSentence(l analyzer.LossInfo) string {
	datapathZero := l.Total == (analyzer.LossCounts{})
	readsClean := l.CounterReadFailures == 0 && l.CounterResets == 0
	switch {
	case datapathZero && readsClean:
		return "All loss counters are zero: every packet was counted, no flow or window event was " +
			"dropped, and every counter read succeeded without a reset."
	case datapathZero:
		return fmt.Sprintf("The datapath lost nothing (every packet counted, no flow or window event dropped); "+
			"the counter reads had %d failures and %d resets, listed below.", l.CounterReadFailures, l.CounterResets)
	}
	return "The datapath did not see everything: totals are exact, but the buckets, flows or window " +
		"events counted below were lost, so rates and culprits can be understated."
}

// lossRows: every loss counter, the total and per interface.
func lossRows(l analyzer.LossInfo) (header []string, rows [][]string) {
	header = []string{"", "TOTAL"}
	for _, i := range l.Interfaces {
		header = append(header, i.Interface)
	}
	row := func(name string, total uint64, per func(analyzer.InterfaceLoss) uint64) {
		r := []string{name, fmtCount(total)}
		for _, i := range l.Interfaces {
			r = append(r, fmtCount(per(i)))
		}
		rows = append(rows, r)
	}
	row("flow_map_full (packets of new flows)", l.Total.FlowMapFull, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.FlowMapFull })
	row("ringbuf_full (window, eviction events)", l.Total.RingbufFull, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.RingbufFull })
	row("bucket_overwritten (packets)", l.Total.BucketOverwritten, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.BucketOverwritten })
	row("slice_overwritten (packets)", l.Total.SliceOverwritten, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.SliceOverwritten })
	row("imds_events (IMDS events dropped)", l.Total.IMDSEvents, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.IMDSEvents })
	row("linklocal_payloads (payloads not recorded)", l.Total.LinkLocalPayloads, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.LinkLocalPayloads })
	row("flows_evicted (idle flows)", l.Total.FlowsEvicted, func(i analyzer.InterfaceLoss) uint64 { return i.Counts.FlowsEvicted })
	var reads uint64
	for _, i := range l.Interfaces {
		reads += uint64(i.CounterReads)
	}
	row("counter reads", reads, func(i analyzer.InterfaceLoss) uint64 { return uint64(i.CounterReads) })
	row("counter read failures", uint64(l.CounterReadFailures), func(i analyzer.InterfaceLoss) uint64 { return uint64(i.CounterReadFailures) })
	row("counter resets", uint64(l.CounterResets), func(i analyzer.InterfaceLoss) uint64 { return uint64(i.CounterResets) })
	return header, rows
}

func readFailureText(f analyzer.ReadFailure, traceStart time.Time) string {
	if f.Count > 1 {
		return fmt.Sprintf("%s %d reads from %s (%s) to %s: %s", f.Interface, f.Count, fmtClock(f.Time, traceStart),
			fmtOffset(f.OffsetS), fmtOffset(f.LastOffsetS), f.Error)
	}
	return fmt.Sprintf("%s at %s (%s): %s", f.Interface, fmtClock(f.Time, traceStart), fmtOffset(f.OffsetS), f.Error)
}

func resetText(r analyzer.CounterReset, traceStart time.Time) string {
	return fmt.Sprintf("%s %s went from %s to %s at %s (%s)", r.Interface, r.Name, fmtCount(r.From),
		fmtCount(r.To), fmtClock(r.Time, traceStart), fmtOffset(r.OffsetS))
}
