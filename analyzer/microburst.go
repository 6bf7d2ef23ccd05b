package analyzer

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

// bandwidthCounter ties a direction to its allowance counter and finding kind.
var bandwidthCounters = []struct {
	dir  record.Direction
	name string
	kind string
}{
	{record.Ingress, counters.BwInAllowanceExceeded, KindMicroburstIn},
	{record.Egress, counters.BwOutAllowanceExceeded, KindMicroburstOut},
}

// zeroSeries stands in for a direction with no recorded traffic.
func (a *analysis) seriesOrEmpty(iface string, dir record.Direction) *fineSeries {
	if fs := a.series(iface, dir); fs != nil {
		return fs
	}
	return newFineSeries(grid{n: a.g.n}, iface, dir)
}

// bandwidthLevels are share of the allowances a fine window is compared
// with, in bytes per window and per second, most generous first: while burst
// credits last the burst ceiling holds, after them the baseline.
func (a *analysis) bandwidthLevels(share float64) []level {
	sec := float64(a.g.widthNs) / 1e9
	var out []level
	if l := a.limits.BurstBps; l.Known {
		out = append(out, level{"burst_allowance", share * l.Value * sec / 8, share * l.Value / 8})
	}
	if l := a.limits.BaselineBps; l.Known && (len(out) == 0 || l.Value*share/8 < out[0].perSecond) {
		out = append(out, level{"baseline_allowance", share * l.Value * sec / 8, share * l.Value / 8})
	}
	return out
}

// microbursts finds, for every jump of a bandwidth counter, the fine windows
// of that direction that stood out in the sample interval, and the flows
// that carried them. Jumps inside a baseline_exhausted window are explained
// by it and left out.
func (a *analysis) microbursts(exhausted map[record.Direction][][2]int) []Finding {
	var out []Finding
	for _, iface := range a.ifaces {
		for _, bc := range bandwidthCounters {
			if !a.hasCounter(iface, bc.name) {
				continue
			}
			fs := a.seriesOrEmpty(iface, bc.dir)
			bytesAt := func(i int) float64 { return float64(fs.bytes[i]) }
			levels := a.bandwidthLevels(a.opt.SaturationShare)
			jumps := a.jumps(iface, bc.name)
			spec := incidentSpec{counter: bc.name, val: bytesAt, excess: func(s span) float64 {
				// Packets above the level: its bytes above it at the span's
				// mean packet size.
				packets := sumUint(fs.packets, s.lo, s.hi)
				above := sumIn(func(i int) float64 { return max(bytesAt(i)-s.level, 0) }, s.lo, s.hi)
				return share(above, share(sumIn(bytesAt, s.lo, s.hi), float64(packets)))
			},
				locate: func(lo, hi int) span {
					if bc.dir == record.Ingress {
						return a.locateShaped(bytesAt, lo, hi, levels...)
					}
					return a.locate(bytesAt, lo, hi, levels...)
				},
				skip: func(lo, hi int) bool { return overlapsAny(lo, hi, exhausted[bc.dir]) }}
			packetsAt := func(lo, hi int) float64 { return float64(sumUint(fs.packets, lo, hi)) }
			src := lagTraffic{locate: spec.locate, val: bytesAt, raised: true}
			if bc.dir == record.Egress {
				// Egress drops were seen by the host before the device
				// dropped them; inbound ones it never saw.
				src.perDrop = func(lo, hi int) float64 { return share(sumIn(bytesAt, lo, hi), float64(sumUint(fs.packets, lo, hi))) }
				src.sentFirst = true
				src.burstStart = func(s span, floor int, stalled bool) span {
					return a.burstStart(iface, bc.dir, s, floor, stalled, bytesAt)
				}
				src.sameFlow = func(s span, x, y int) bool {
					top, ok := a.topFlow(iface, bc.dir, s.lo, s.hi)
					other, otherOK := a.topFlow(iface, bc.dir, x, y)
					return ok && otherOK && top == other
				}
			} else {
				src.shapedPackets = packetsAt
			}
			spec.sentFirst, spec.apart = src.sentFirst, src.sentFirst
			lag := a.counterLagFor(iface, jumps, src)
			spec.lag = lag
			spec.readNs = a.readInterval(iface)
			spec.raised = true
			spec.packets = packetsAt
			var depth float64
			if len(levels) > 0 {
				// Traffic over the allowance that built no more than
				// the bucket the run shows holds (below) made no drop
				// of its own: a TCP flow's bunch behind a burst, whose
				// queue's rest a 1 s refresh showed a second later, was
				// a second finding naming it.
				spec.explained = func(s span) bool {
					return overAllowance(s) && (s.levelName != levels[0].name || builtOver(bytesAt, s) > depth)
				}
				// What the counter let through uncounted over the
				// allowance shows how deep its bucket is at least
				// (quietLook).
				depth = a.shownDepth(iface, bc.name, bytesAt, levels[0].perWindow, quietLook(lag))
				spec.start = func(s span, _, _ int) int {
					if s.levelName != levels[0].name {
						return s.lo
					}
					return a.incidentStart(bytesAt, s, depth, spec.sentFirst)
				}
			}
			// One incident while the traffic stays at its level, or, with
			// the allowance known, short of it by no more than the bucket
			// the run shows refills: the survivors of an inbound burst
			// reach the host at the allowance, and a jump read 55 ms after
			// the burst's first, showing the rest of its drops, was put on
			// the download's retransmissions after them, a second finding
			// naming a victim.
			spec.over = func(lo, hi int, last span) bool {
				return stayedAt(bytesAt, lo, hi, last) || depth > 0 && last.levelName == levels[0].name && shortOfAtMost(bytesAt, lo, hi, last.level, depth)
			}
			if bc.dir == record.Ingress && len(levels) == 0 {
				// Inbound with none known, the device's queue sending
				// after a burst shows the allowance (queueRate), and the
				// bucket the run shows at that rate (a window's refill
				// deeper: the gap's edges are known to a window only)
				// what it refills: the download's bunches 9 to 18 ms
				// after the queue emptied, over a bucket not yet refilled,
				// were a second finding naming it (s44/ig2, 82 drops;
				// s44i/iu9, 4). They are the burst's victims.
				//
				// The bucket the run shows is the least it can be, and
				// the device's may be deeper. But traffic that built no
				// more over that rate than traffic that moved nothing
				// did, and was counted, met a bucket short of full: within
				// IncidentRefill of the incident, the last to empty it was
				// that incident (a download's catch-up 13 ms after the
				// queue emptied, 63 kB short of the rate where the bucket
				// shown was 56 kB, 3 drops: a finding naming the download).
				queueDepth := a.shownDepths(iface, bc.name, bytesAt, quietLook(lag))
				spec.refills = func(lo, hi int, last, next span) bool {
					if last.levelName != levelIntervalOwn {
						return false
					}
					end := queueEnd(bytesAt, last.hi, hi)
					rate, ok := queueRate(bytesAt, last.lo, end)
					for k := last.hi - 1; !ok && k > last.lo; k-- {
						// A burst its sender paused in reached the host
						// in parts, each a head and the device's queue
						// sending after it, the pauses empty: taken
						// whole, its median window is an empty one. Its
						// last part's queue shows the rate (a download's
						// bunches 19 ms after it on, 18 drops, a second
						// finding naming the download).
						rate, ok = queueRate(bytesAt, k, end)
					}
					if !ok {
						return false
					}
					depth := queueDepth(rate)
					if shortOfAtMost(bytesAt, lo, hi, rate, depth+rate) {
						return true
					}
					soon := a.g.startNs(hi)-a.g.startNs(lo) <= int64(a.opt.IncidentRefill)
					return soon && next.levelName != levelNone && builtOver(bytesAt, span{lo: next.lo, hi: next.hi, level: rate}) <= depth
				}
			} else if bc.dir == record.Egress && len(levels) == 0 {
				// Outbound with none known, the same: traffic that held
				// no more than traffic that moved nothing did, at the
				// level it stood out from and under (heldLikeQuiet), and
				// was counted within IncidentRefill of an incident, met
				// a bucket that incident left short (a TCP flow's 38 kB
				// bunches 15 to 37 ms after a burst's catch-up, 91 drops:
				// a second warning naming the TCP flow, in 3 of 34 fresh
				// runs, c10). Its victims, as its queue's are.
				quiet := a.shownDepths(iface, bc.name, bytesAt, quietLook(lag))
				plain := spec.locate
				spec.locate = func(lo, hi int) span {
					return a.notLikeQuiet(plain(lo, hi), bytesAt, quiet, lo, hi)
				}
				spec.likeQuiet = func(x, y int, level float64) bool { return heldLikeQuiet(bytesAt, quiet, level, x, x, y) }
				spec.refills = func(lo, hi int, last, next span) bool {
					if last.levelName != levelIntervalOwn || next.levelName != levelIntervalOwn || next.level <= 0 {
						return false
					}
					soon := a.g.startNs(hi)-a.g.startNs(lo) <= int64(a.opt.IncidentRefill)
					return soon && heldLikeQuiet(bytesAt, quiet, next.level, next.lo, next.lo, next.hi)
				}
			}
			out = append(out, a.foldRecurring(a.incidents(spec, jumps), func(inc incident) Finding {
				return a.microburstFinding(iface, bc.dir, bc.name, bc.kind, fs, inc, lag)
			})...)
			out = append(out, a.nearMisses(iface, bc.dir, bc.name, bc.kind, fs, lag)...)
		}
	}
	return out
}

// notLikeQuiet is s, located in windows [lo, hi) with no allowance
// known, or, where it held no more than traffic that moved nothing did
// (heldLikeQuiet), the part of [lo, hi) over its level (parts further
// apart than MergeGap are two) that carried the most above it among
// those that held more; s where none did. Alike parts stand out of a
// look-back alike at the level, and the first is taken: a TCP flow's
// 60 kB bunches every 20 ms, one more between two (which overflowed a
// 64 KiB bucket), behind a refresh too rare to learn, looked back a
// second over 45 bunches, and the finding began at the first, 900 ms
// early.
func (a *analysis) notLikeQuiet(s span, val func(int) float64, shown func(level float64) float64, lo, hi int) span {
	if s.levelName != levelIntervalOwn || s.level <= 0 || !heldLikeQuiet(val, shown, s.level, s.lo, s.lo, s.hi) {
		return s
	}
	best, found := 0.0, s
	eachPart(val, lo, hi, s.level, a.mergeGapWindows(), func(x, y int) {
		if over := overLevel(val, span{lo: x, hi: y}, s.level); over > best && !heldLikeQuiet(val, shown, s.level, x, x, y) {
			best, found.lo, found.hi = over, x, y
		}
	})
	return found
}

// quietLook is how long after a window no jump may come for its traffic
// to count as having moved nothing (shownDepth): the longest lag and the
// refresh, whatever the lag learned (learned wrong, 24 ms short, a burst's
// own windows passed for quiet: 1 MB where the lab's bucket held 64 KiB).
func quietLook(lag counterLag) int64 { return max(lag.lookNs, int64(MaxCounterLag)+lag.refreshNs) }

// pauseWindows is how many fine windows with nothing over a level a run of
// traffic over it may hold and go on: a sender's pause (the lab's burst
// sender, 1 ms).
func (a *analysis) pauseWindows() int { return max(int(int64(time.Millisecond)/a.g.widthNs), 1) }

func (a *analysis) mergeGapWindows() int { return int(int64(a.opt.MergeGap) / a.g.widthNs) }

// overAllowance tells a span located over a known allowance from one
// that only stood out from its interval.
func overAllowance(s span) bool { return s.levelName != levelIntervalOwn && s.levelName != levelNone }

// stayedAt tells whether every fine window of [lo, hi) held the level the
// incident so far stood out from: the burst went on between two reads.
func stayedAt(val func(int) float64, lo, hi int, last span) bool {
	if last.level <= 0 || last.levelName == levelNone {
		return false
	}
	return countAbove(val, lo, hi, last.level) == hi-lo
}

func (a *analysis) microburstFinding(iface string, dir record.Direction, counter, kind string, fs *fineSeries, inc incident, lag counterLag) Finding {
	bytesAt := func(i int) float64 { return float64(fs.bytes[i]) }
	sec := float64(a.g.widthNs) / 1e9
	standOut := func(i int) bool { return inc.level > 0 && bytesAt(i) >= inc.level }
	if inc.levelName == levelNone {
		standOut = nil
	}
	// Inbound, the host sees what the device let through: a burst's
	// survivors, at the allowance, are fewer bytes than a steady download
	// beside them (the lab's impact-inbound, its allowance given: the
	// download named first in 3 runs of 4). What a flow carried above its
	// own rate before tells the one that rose; where none rose, or the
	// one that did carried a trifle of the span (a probe's pings beside a
	// download's own overflow, which its snapshots spread evenly), bytes.
	rank := func(inc incident) (culprits, victims []FlowShare, by string) {
		by = rankBytes
		if dir == record.Ingress {
			by = rankAboveUsual
		}
		culprits, victims = a.incidentFlows(iface, []record.Direction{dir}, inc, standOut, by, nil)
		if by == rankAboveUsual && (len(culprits) == 0 || float64(culprits[0].Bytes) < minRiseShare*sumIn(bytesAt, inc.lo, inc.hi)) {
			by = rankBytes
			culprits, victims = a.incidentFlows(iface, []record.Direction{dir}, inc, standOut, by, nil)
		}
		return culprits, victims, by
	}
	// Before ranking: chained other traffic ahead of the cause carried
	// the most over a long span, and was named.
	shown := a.quietShown(inc, bytesAt, lag)
	inc.lo = a.quietHead(inc, bytesAt, shown)
	culprits, victims, rankedBy := rank(inc)
	if len(culprits) > 0 {
		if lo := a.culpritStart(iface, dir, culprits[0], inc, bytesAt, lag, shown); lo != inc.lo {
			inc.lo = lo
			culprits, victims, rankedBy = rank(inc)
		}
	}
	s := inc.span
	f := a.newFinding(kind, a.incidentSeverity(inc), iface, []record.Direction{dir}, s.lo, s.hi)
	f.Incident = a.incidentInfo(inc, counter, lag, bytesAt, 8, "bps")
	peak, _ := peakIn(bytesAt, s.lo, s.hi)
	// A burst straddling two grid windows is split between them: its
	// peak is the window's width slid over the buckets, as the profile's.
	peak = max(peak, a.slidingPeakBytes(iface, dir, a.g.startNs(s.lo), a.g.startNs(s.hi), a.g.widthNs))
	spanBytes := sumIn(bytesAt, s.lo, s.hi)
	dur := float64(s.hi-s.lo) * sec
	f.Evidence = append(f.Evidence, incidentEvidence(f.Incident)...)
	f.Evidence = append(f.Evidence,
		ev("peak_fine_window_bps", peak*8/sec, "bps"),
		ev("span_mean_bps", share(spanBytes*8, dur), "bps"),
		ev("span_bytes", spanBytes, "bytes"),
		ev("stand_out_windows", float64(countAbove(bytesAt, s.lo, s.hi, max(s.level, 1))), "count"),
		ev("level_bps", s.levelPerSecond*8, "bps"),
	)
	if l := a.limits.BurstBps; l.Known {
		f.Evidence = append(f.Evidence, ev("burst_allowance_bps", l.Value, "bps"))
	}
	if l := a.limits.BaselineBps; l.Known {
		f.Evidence = append(f.Evidence, ev("baseline_allowance_bps", l.Value, "bps"))
	}
	f.Flows, f.Victims, f.FlowsRankedBy = culprits, victims, rankedBy
	what := "stood out from the interval's own level"
	if s.levelName != levelIntervalOwn && s.levelName != levelNone {
		what = fmt.Sprintf("reached the %s allowance of %s", s.levelName[:len(s.levelName)-len("_allowance")],
			units.BitRate(s.levelPerSecond*8/a.opt.SaturationShare))
	}
	learned := ""
	if !a.limits.BurstBps.Known && !a.limits.BaselineBps.Known {
		// Egress drops were seen by the host before the device dropped
		// them: they did not pass. Inbound ones it never saw.
		meanSize := share(spanBytes, sumIn(func(i int) float64 { return float64(fs.packets[i]) }, s.lo, s.hi))
		dropped := func(d uint64) float64 { return float64(d) * meanSize }
		if dir == record.Ingress {
			dropped = func(uint64) float64 { return 0 }
		}
		f.Incident.LearnedAllowance = a.learnAllowance(inc, bytesAt, dropped, 8, "bps")
		if l := f.Incident.LearnedAllowance; l != nil {
			learned = learnedText(l, "--baseline/--burst", fmt.Sprintf("%.0fMbit", l.Value/1e6))
		}
	}
	f.Summary = fmt.Sprintf("%s; the %s rate %s for %s, up to %s per %s window, %s; %s%s",
		jumpsText(f.Incident), dir, what, units.Seconds(dur), units.BitRate(peak*8/sec),
		fmtWindow(a.g.widthNs), topFlowText(f.Flows), lagText(f.Incident), learned)
	f.Summary += victimsText(f.Victims, f.Incident)
	f.Recommendation = recommendMicroburst
	return f
}

// culpritStart is where an incident whose traffic was located as s
// starts, given the flow named its culprit: where that flow was first
// seen, when that lies at most MergeGap from s's start, before it (the
// culprit's own first packets, before a pause of its sender's that ended
// what stood out: a burst's first 20 kB, 4 ms before the rest, started
// its finding 5 ms late) or inside s (what came before it was other
// traffic: a TCP flow's bunch 2.5 ms before a burst started its finding);
// otherwise s.lo. A flow seen since long before says nothing of when its
// burst began; one first seen further into s joined traffic over the
// allowance that others began.
//
// Further back, the culprit's first sighting is the start when the
// counter cannot tell its earlier traffic from s (the incident's first
// jump looks back over both, and no incident before it lies between
// them) and that traffic is of a piece with s: the
// flow was born a burst and stood out at s's level every time it sent
// (burstBefore). A burst whose sender paused 11 to 32 ms inside it (its
// socket's buffer full behind its own queue), counters refreshed once a
// second, was found from its last part, 31 ms late. Past the first
// jump's look-back too (no incident between), where the flow was born a
// burst its sender stalled in (bornBurst). Further into s, with no
// allowance known, where what came before in s held no more than traffic
// that moved nothing did (heldLikeQuiet).
func (a *analysis) culpritStart(iface string, dir record.Direction, culprit FlowShare, inc incident, val func(int) float64, lag counterLag, shown func(level float64) float64) int {
	s := inc.span
	first, ok := a.flows.firstSeen(iface, culprit.Src, culprit.Dst, a.g.startNs(s.hi))
	if !ok {
		return s.lo
	}
	at := a.g.index(first)
	gap := a.mergeGapWindows()
	if at > s.lo+gap && at < s.hi && s.levelName == levelIntervalOwn && s.level > 0 && len(inc.jumps) > 0 &&
		heldLikeQuiet(val, shown, s.level, s.lo, s.lo, at) {
		// With no allowance known, the traffic of s before the
		// culprit's first packet held no more than traffic that moved
		// nothing did: others' traffic began nothing. A burst paced at
		// 200 Mbit/s, under the level its sender's catch-up set, beside
		// a TCP flow's 32 kB bunches 7 to 10 ms apart: the first jump's
		// look-back took the bunches into the span from 19 ms before the
		// burst, none of them over the level for quietHead to set aside,
		// and the finding began there.
		return at
	}
	if at > s.lo+gap || at >= s.hi {
		return s.lo
	}
	if at >= s.lo-gap {
		return at
	}
	if len(inc.jumps) == 0 || s.levelName == levelNone {
		return s.lo
	}
	from, _ := a.certain(inc.jumps[0])
	floor := max(a.g.index(from-lag.lookNs), inc.floor)
	if dir == record.Ingress && at >= floor && a.shapedParts(val, at, s) {
		return at
	}
	if lo := a.burstFrom(iface, dir, culprit.Src, culprit.Dst, s, floor, val); lo != s.lo || at < inc.floor {
		return lo
	}
	if _, born := a.bornBurst(iface, culprit, first, s, val); born {
		return at
	}
	return s.lo
}

// quietHead is where incident inc's traffic began, with no allowance
// known, past its leading parts (runs of windows over its level) that
// each held no more than traffic that moved nothing did, at the level and
// under it (heldLikeQuiet): other flows' traffic like any other, joined
// to the cause within MergeGap. Its start where every part did, or none
// did: what lies under its level before its first part is not tested.
// In a run of recurring incidents, only parts of the first: it moved the
// counter itself (an inbound burst whose sender, starved of CPU, paused
// 12 ms inside it, its two parts two incidents, had its first part set
// aside as held like quiet, and the finding began 27.4 ms late).
func (a *analysis) quietHead(inc incident, val func(int) float64, shown func(level float64) float64) int {
	if inc.levelName != levelIntervalOwn || inc.level <= 0 || len(inc.jumps) == 0 {
		return inc.lo
	}
	lo, found, passed := inc.lo, false, false
	hi := inc.hi
	if inc.firstHi > 0 {
		hi = inc.firstHi
	}
	eachPart(val, inc.lo, hi, inc.level, 0, func(x, y int) {
		switch {
		case found:
		case heldLikeQuiet(val, shown, inc.level, x, x, y):
			passed = true
		default:
			lo, found = x, true
		}
	})
	if !found || !passed {
		return inc.lo
	}
	return lo
}

// quietShown is the bucket, per level, that the traffic of incident inc's
// counter shows over the run (shownDepths), for heldLikeQuiet; each level
// is worked out once, when first asked for. Nil where inc has no jumps.
func (a *analysis) quietShown(inc incident, val func(int) float64, lag counterLag) func(level float64) float64 {
	if len(inc.jumps) == 0 {
		return nil
	}
	j := inc.jumps[0]
	return a.shownDepths(j.Interface, j.Name, val, quietLook(lag))
}

// bornBurst tells whether the culprit of span s, first seen at firstNs
// before it, was born a burst that its sender stalled in before s: from
// that first packet the interface carried, over what it carried before,
// at least half the flow's own mean rate (over its drain interval, from
// that packet), in a run of windows no more than 2 ms apart that ended
// in a silence of more than that and at most twice MergeGap before s.
// The flow's own windows may not show it: a sender paced at 200 Mbit/s
// stays under the heavy-window threshold. Starved of CPU beside two
// CPU-bound processes (the lab's impact-dropped), it stalled 8 to 15 ms
// after 4 to 7 ms, then sent what it owed in 1 to 2 ms, and with no
// allowance known the finding began there, 12 to 22 ms after the burst.
// A flow born sending slower than that, or one that went on into s
// without a stall, had not begun the burst. It may have stalled more than
// once before s, each stall as short, its runs as fast, where it sent for
// at least as long as it stalled between them: behind a 1 s refresh,
// with no allowance known, a burst paced at 200 Mbit/s whose sender
// stalled 8 and 10 ms, catching up after each (the lab's impact-dropped
// beside two CPU-bound processes, c14/load/r2 and r3), had its one jump
// put on its second catch-up, 46 to 75 ms late. A TCP flow's bunches
// (1 ms every 8 to 20 ms) stall far longer than they send. Its first
// packets may lead its head by up to twice that 2 ms, under a quarter of
// its rate (beside load, a burst's first packets 3 ms before its paced
// head: not born a burst, its second catch-up was taken for the cause
// of the jumps after it, the finding 36.7 ms late, c17/load/l1). level
// is what its runs were followed at, per window: what the interface
// carried before the burst and a quarter of the flow's mean rate.
func (a *analysis) bornBurst(iface string, culprit FlowShare, firstNs int64, s span, val func(int) float64) (level float64, born bool) {
	perNs, ok := a.flows.meanRateAt(iface, culprit.Src, culprit.Dst, firstNs)
	if !ok {
		return 0, false
	}
	rate := perNs * float64(a.g.widthNs) // bytes per window
	at, gap, pause := a.g.index(firstNs), a.mergeGapWindows(), 2*a.pauseWindows()
	before := sumIn(val, max(at-gap, 0), at) / float64(max(min(gap, at), 1))
	// runFrom is the run of windows from x, each over a quarter of the
	// rate, no more than pause apart, and whether it sent at half the
	// rate at least over two windows or more.
	runFrom := func(x int) (end int, fast bool) {
		end = x
		for k := x; k < s.lo && k-end <= pause; k++ {
			if val(k)-before >= rate/4 {
				end = k + 1
			}
		}
		return end, end-x >= 2 && sumIn(val, x, end)/float64(end-x)-before >= rate/2
	}
	level = before + rate/4
	end, fast := runFrom(at)
	// Its first packets may lead the head by a few ms, under a quarter
	// of the rate: the head may begin up to twice pause after them.
	for x := at + 1; !fast && x <= at+2*pause && x < s.lo; x++ {
		if val(x)-before >= rate/4 {
			if end, fast = runFrom(x); fast {
				at = x
			}
		}
	}
	if !fast {
		return 0, false
	}
	if s.lo-end > pause && s.lo-end <= 2*gap {
		return level, true
	}
	// Runs as fast after stalls as short: the last before s ends in one.
	if a.g.startNs(s.lo)-firstNs > int64(stalledBurstReach) {
		return 0, false
	}
	sent, stalled := end-at, 0
	for end < s.lo {
		// The next fast run; blips of others' traffic are the stall's.
		next, runEnd := end, s.lo
		for ; next < s.lo; next++ {
			if val(next)-before < rate/4 {
				continue
			}
			e, f := runFrom(next)
			if f {
				runEnd = e
				break
			}
			next = e - 1
		}
		if next-end > 2*gap {
			return 0, false
		}
		if next >= s.lo {
			return level, s.lo-end > pause && sent >= stalled
		}
		sent, stalled, end = sent+runEnd-next, stalled+next-end, runEnd
	}
	return 0, false
}

// shapedParts tells whether an inbound burst located as s, its flow first
// seen at window at before it, reached the host in parts from there: the
// window at stands out of the rate the device's queue sent s at, and from
// at to s the traffic never fell under a quarter of that rate for longer
// than MergeGap. Inbound windows seldom reach the heavy-window threshold,
// so the flow's own parts are not seen: a sender pausing 4 to 8 ms
// between four parts of its burst, the device's bucket refilling in each
// pause, had the finding start at the last part, the one its queue sent
// longest (the lab's impact-inbound behind 30 ms: 24.5 ms late; 14.5 with
// the allowance given).
func (a *analysis) shapedParts(val func(int) float64, at int, s span) bool {
	rate, ok := queueRate(val, s.lo, s.hi)
	if !ok || val(at) < a.opt.StandOutFactor*rate {
		return false
	}
	quiet := 0
	for i := at; i < s.lo; i++ {
		if val(i) >= rate/4 {
			quiet = 0
			continue
		}
		if quiet++; quiet > a.mergeGapWindows() {
			return false
		}
	}
	return true
}

// burstStart is s begun where the burst located as s began, for the lag
// learned from it: the first sighting of the flow that carried most of s,
// where that lies before s, no earlier than floor, and the flow's traffic
// between was of a piece with s (burstBefore); else s. Where stalled, a
// flow born a burst its sender stalled in (bornBurst) also began it, at
// the level its runs were followed at where that is lower. The same rule
// as culpritStart's, before the lag is known: a sender's pauses inside
// its burst leave its largest part the most over the level, and the
// first drop, in its first part, taken as no earlier than that part put
// the lag 17 to 65 ms short. (Not on to the flow's parts after s: its
// last drops may lie there, but behind a deep queue counted as it drains
// the parts of a sender starved of CPU, taken as the burst's end, put the
// lag at 331 ms where the lab's was 0. Its caller follows the flow on
// only while it sends: within twice MergeGap (sameFlow), and a stalled
// burst at the lower level it was followed back at.)
func (a *analysis) burstStart(iface string, dir record.Direction, s span, floor int, stalled bool, val func(int) float64) span {
	top, ok := a.topFlow(iface, dir, s.lo, s.hi)
	if !ok {
		return s
	}
	src, dst := top.Src.String(), top.Dst.String()
	if lo := a.burstFrom(iface, dir, src, dst, s, floor, val); lo != s.lo || !stalled {
		s.lo = lo
		return s
	}
	first, ok := a.flows.firstSeen(iface, src, dst, a.g.startNs(s.hi))
	if at := a.g.index(first); ok && at < s.lo && at >= floor {
		if level, born := a.bornBurst(iface, FlowShare{Src: src, Dst: dst}, first, s, val); born && level < s.level {
			s.lo, s.level = at, level
		}
	}
	return s
}

// topFlow is the flow whose window events carried the most bytes in fine
// windows [lo, hi); ok is false where none did.
func (a *analysis) topFlow(iface string, dir record.Direction, lo, hi int) (record.FlowKey, bool) {
	var top *flowTally
	ts := a.events.tallies(seriesKey{iface, dir}, a.g, lo, hi, nil)
	for i := range ts {
		if top == nil || ts[i].bytes > top.bytes {
			top = &ts[i]
		}
	}
	if top == nil {
		return record.FlowKey{}, false
	}
	return top.ref.key, true
}

// burstFrom is the first sighting of the flow from src to dst, where that
// lies before span s, no earlier than floor, and the flow's traffic from
// it to s was of a piece with s (burstBefore); else s.lo.
func (a *analysis) burstFrom(iface string, dir record.Direction, src, dst string, s span, floor int, val func(int) float64) int {
	first, ok := a.flows.firstSeen(iface, src, dst, a.g.startNs(s.hi))
	if !ok {
		return s.lo
	}
	if at := a.g.index(first); at < s.lo && at >= floor && a.burstBefore(iface, dir, src, dst, at, s, val) {
		return at
	}
	return s.lo
}

// burstBefore tells whether the traffic of the flow from src to dst in
// fine windows [at, s.lo), from its first sighting at to span s, was one
// burst's: its runs (flowRuns) begin within MergeGap of at, each reached
// s's level and StandOutPeakShare of s's peak (runReaches: parts that
// stood out as s did; over an allowance given, any part of a flow's
// transfers would) and came at most IncidentRefill before the next or s:
// a longer silence lets a bucket refill, the earlier run a burst of its
// own. A flow that began with a trickle, or sent at a rate that did not
// stand out, had not begun the burst.
func (a *analysis) burstBefore(iface string, dir record.Direction, src, dst string, at int, s span, val func(int) float64) bool {
	runs := a.flowRuns(iface, dir, src, dst, at, s.lo)
	if len(runs) == 0 || runs[0][0] > at+a.mergeGapWindows() {
		return false
	}
	peak, _ := peakIn(val, s.lo, s.hi)
	level := max(s.level, a.opt.StandOutPeakShare*peak)
	for k, r := range runs {
		next := s.lo
		if k+1 < len(runs) {
			next = runs[k+1][0]
		}
		if next-r[1] > a.refillWindows() || !a.runReaches(iface, dir, r, level) {
			return false
		}
	}
	return true
}

// stalledBurstReach is how far before the span it located a burst whose
// sender stalled more than once is followed back to its first packet
// (bornBurst): the lab's 2 MB bursts last 80 ms, stalls and all; a TCP
// flow born 1.4 s before a span it led, stalling now and then beside CPU
// load, had its extra finding (c9/load/q1) taken back to its birth.
const stalledBurstReach = 200 * time.Millisecond

// refillWindows is IncidentRefill in fine windows: the longest silence a
// bucket is taken not to refill in.
func (a *analysis) refillWindows() int { return int(int64(a.opt.IncidentRefill) / a.g.widthNs) }

// flowRuns are the runs of the flow from src to dst's window events (the
// windows it moved HeavyBytes or more in) within fine windows [lo, hi),
// events at most a pause apart (pauseWindows) being one run.
func (a *analysis) flowRuns(iface string, dir record.Direction, src, dst string, lo, hi int) [][2]int {
	var runs [][2]int
	evs := a.events[seriesKey{iface, dir}]
	fromNs, toNs := a.g.startNs(lo), a.g.startNs(hi)
	i, _ := slices.BinarySearchFunc(evs, fromNs-a.g.widthNs, func(e record.WindowEvent, t int64) int { return cmp.Compare(e.StartNs, t) })
	for ; i < len(evs) && evs[i].StartNs < toNs; i++ {
		e := &evs[i]
		x, y := a.g.index(e.StartNs), a.g.index(e.StartNs+max(e.WidthNs, 1)-1)+1
		if y <= lo || x >= hi || e.Key.Src.String() != src || e.Key.Dst.String() != dst {
			continue
		}
		x, y = max(x, lo), min(y, hi)
		if n := len(runs); n > 0 && x <= runs[n-1][1]+a.pauseWindows() {
			runs[n-1][1] = max(runs[n-1][1], y)
			continue
		}
		runs = append(runs, [2]int{x, y})
	}
	return runs
}

// runReaches tells whether the traffic of fine windows r reached level in
// a window's time slid over the buckets: a 140 kB part over a 106 kB
// level came as 101 and 39 kB in two grid windows.
func (a *analysis) runReaches(iface string, dir record.Direction, r [2]int, level float64) bool {
	return a.slidingPeakBytes(iface, dir, a.g.startNs(r[0]), a.g.startNs(r[1]), a.g.widthNs) >= level
}

// minRiseShare is the least share of a span's bytes the flow that rose
// most must carry to lead an inbound finding (rankAboveUsual).
const minRiseShare = 0.1

func fmtWindow(ns int64) string {
	if ns%1e6 == 0 {
		return fmt.Sprintf("%d ms", ns/1e6)
	}
	return fmt.Sprintf("%d µs", ns/1e3)
}

// nearMisses folds the stretches of fine windows at or above NearMissShare
// of the allowance while the counter, read before and after, did not move
// into one info finding: a rate above the allowance that moved no counter
// was absorbed by a burst bucket, one just under it came close. Its flows
// are those of the MaxNearMisses highest stretches.
func (a *analysis) nearMisses(iface string, dir record.Direction, counter, kind string, fs *fineSeries, lag counterLag) []Finding {
	levels := a.bandwidthLevels(a.opt.NearMissShare)
	if len(levels) == 0 {
		return nil
	}
	thr := levels[0].perWindow
	allowance := levels[0].perSecond * 8 / a.opt.NearMissShare
	sec := float64(a.g.widthNs) / 1e9
	watched := a.watchedWindows(iface, counter, lag)
	gap := a.mergeGapWindows()
	type miss struct {
		lo, hi  int
		peak    float64
		windows int
	}
	var misses []miss
	for i := 0; i < a.g.n; i++ {
		v := float64(fs.bytes[i])
		if v < thr || watched[i] != watchedQuiet {
			continue
		}
		if n := len(misses); n > 0 && i-misses[n-1].hi <= gap {
			m := &misses[n-1]
			m.hi, m.peak, m.windows = i+1, max(m.peak, v), m.windows+1
			continue
		}
		misses = append(misses, miss{lo: i, hi: i + 1, peak: v, windows: 1})
	}
	minWindows := max(int(int64(a.opt.NearMissMin)/a.g.widthNs), 1)
	misses = slices.DeleteFunc(misses, func(m miss) bool { return m.windows < minWindows })
	if len(misses) == 0 {
		return nil
	}
	lo, hi := misses[0].lo, misses[len(misses)-1].hi
	var windows, absorbed int
	for _, m := range misses {
		windows += m.windows
		if m.peak*8/sec > allowance {
			absorbed++
		}
	}
	top := slices.Clone(misses)
	slices.SortStableFunc(top, func(x, y miss) int { return cmp.Compare(y.peak, x.peak) })
	highest := top[0]
	top = top[:min(len(top), a.opt.MaxNearMisses)]
	inTop := func(i int) bool {
		for _, m := range top {
			if i >= m.lo && i < m.hi {
				return float64(fs.bytes[i]) >= thr
			}
		}
		return false
	}
	f := a.newFinding(kind, SeverityInfo, iface, []record.Direction{dir}, lo, hi)
	peakBps := highest.peak * 8 / sec
	f.Evidence = append(f.Evidence,
		ev("near_miss_stretches", float64(len(misses)), "count"),
		ev("absorbed_stretches", float64(absorbed), "count"),
		ev("near_windows", float64(windows), "count"),
		ev("peak_fine_window_bps", peakBps, "bps"),
		ev("allowance_bps", allowance, "bps"),
		ev("peak_share_of_allowance", peakBps/allowance, "ratio"),
		ev(counter, 0, "packets"))
	f.FlowsRankedBy = rankBytes
	f.Flows = a.culprits(iface, []record.Direction{dir}, lo, hi, inTop, rankBytes, nil)
	what := fmt.Sprintf("%d stretches", len(misses))
	if len(misses) == 1 {
		what = "1 stretch"
	}
	absorbedText := "none over it: they came close"
	if absorbed > 0 {
		absorbedText = fmt.Sprintf("%d over it, absorbed by a burst bucket", absorbed)
	}
	f.Summary = fmt.Sprintf("%s of the %s rate at %.0f%% or more of the %s allowance moved no %s (%s); the highest reached %s per %s window (%.0f%%) at %s; %s",
		what, dir, 100*a.opt.NearMissShare, units.BitRate(allowance), counter, absorbedText, units.BitRate(peakBps),
		fmtWindow(a.g.widthNs), 100*peakBps/allowance, fmtOffsetS(a.offsetS(a.g.startNs(highest.lo))), topFlowText(f.Flows))
	f.Recommendation = recommendNearMiss
	return []Finding{f}
}

func fmtOffsetS(s float64) string { return fmt.Sprintf("+%.3f s", s) }

// Window states of watchedWindows.
const (
	watchedUnknown = iota // outside the counter reads: nobody watched
	watchedQuiet          // between two reads that saw no jump
	watchedMoved          // in a sample interval where the counter jumped
)

// watchedWindows marks every fine window by what the counter said about it.
// Linear: each window is marked once per read interval holding it.
func (a *analysis) watchedWindows(iface, counter string, lag counterLag) []uint8 {
	w := make([]uint8, a.g.n)
	var first, last int64 = -1, -1
	for _, s := range a.rec.Counters {
		if s.Interface != iface || s.Err != "" {
			continue
		}
		if _, ok := s.Values[counter]; !ok {
			continue
		}
		if first < 0 || s.AfterNs < first {
			first = s.AfterNs
		}
		last = max(last, s.BeforeNs)
	}
	if first < 0 || last <= first {
		return w
	}
	lo, hi := a.g.span(first, last)
	for i := lo; i < hi; i++ {
		w[i] = watchedQuiet
	}
	for _, j := range a.jumps(iface, counter) {
		from, to := a.certain(j)
		lo, hi := a.g.span(from-lag.lookNs, to-lag.shiftNs)
		for i := lo; i < hi; i++ {
			w[i] = watchedMoved
		}
	}
	// A reset hides what happened in its interval. A failed read hides
	// nothing: the next jump is measured from the last good read.
	for _, r := range a.changes.Resets {
		if r.Interface == iface && r.Name == counter {
			lo, hi := a.g.span(r.FromNs, r.ToNs)
			for i := lo; i < hi; i++ {
				w[i] = watchedUnknown
			}
		}
	}
	return w
}

// slidingPeakBytes is the most bytes of one interface and direction in a
// window of widthNs slid over its buckets, among the windows that overlap
// [fromNs, toNs): what the profile's peak of that width measures.
func (a *analysis) slidingPeakBytes(iface string, dir record.Direction, fromNs, toNs, widthNs int64) float64 {
	for _, s := range a.rec.Series {
		if s.Interface != iface || s.Direction != dir {
			continue
		}
		lo, _ := slices.BinarySearchFunc(s.Buckets, fromNs-widthNs+1, func(b record.Bucket, t int64) int { return cmp.Compare(b.StartNs, t) })
		hi, _ := slices.BinarySearchFunc(s.Buckets, toNs+widthNs, func(b record.Bucket, t int64) int { return cmp.Compare(b.StartNs, t) })
		var best, sum uint64
		j := lo
		for i := lo; i < hi; i++ {
			for ; j < hi && s.Buckets[j].StartNs < s.Buckets[i].StartNs+widthNs; j++ {
				sum += s.Buckets[j].Bytes
			}
			best = max(best, sum)
			sum -= s.Buckets[i].Bytes
		}
		return float64(best)
	}
	return 0
}
