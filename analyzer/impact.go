package analyzer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Impact verdicts (Impact.Verdict).
const (
	// ImpactDropped: TCP segments were sent again during the incident or
	// its retransmission tail: something was lost.
	ImpactDropped = "dropped"
	// ImpactQueued: nothing was sent again, but the srtt of TCP flows rose
	// by more than its noise in the seconds before: packets waited.
	ImpactQueued = "queued"
	// ImpactNone: TCP flows ran through the incident, lost nothing, and
	// their srtt stayed within its noise: queued briefly at most.
	ImpactNone = "none"
	// ImpactUnknown: the trace cannot tell (no TCP in the span, or a
	// recording made before impact was measured).
	ImpactUnknown = "unknown"
)

// impactKinds are the findings that carry an impact: those of an
// allowance that queues or drops packets.
var impactKinds = map[string]bool{
	KindMicroburstIn: true, KindMicroburstOut: true, KindPPSExceeded: true, KindBaselineExhausted: true,
}

// Impact is what an incident cost the TCP flows that ran through it, from
// the kernel's own count of each local socket's retransmissions and srtt
// and from the wire (segments whose sequence range had been seen before:
// a remote sender's retransmissions, and a forwarded flow's).
type Impact struct {
	Verdict string `json:"verdict"` // dropped, queued, none or unknown
	Summary string `json:"summary"` // the verdict for people, with how much and how long
	// Retransmitted are the TCP segments sent again in the incident and
	// the retransmission tail after it, by direction: egress by this
	// host's sockets (their own count) or forwarded senders (the wire),
	// ingress by remote senders (the wire); tail loss probes left out.
	Retransmitted ImpactRetransmitted `json:"retransmitted"`
	// TailProbes are the segments sent again up to the highest sequence
	// sent (tail loss probes: a wait past two srtt sets them off, with or
	// without a loss), not in Retransmitted.
	TailProbes uint64 `json:"tail_probes,omitempty"`
	// Spurious are the segments local sockets sent again needlessly: the
	// receiver reported it had them already (D-SACK), as when a timeout
	// fires while the original waits in a queue. Not in Retransmitted;
	// a tail probe D-SACKed counts once, in the larger of the two.
	Spurious uint64 `json:"spurious,omitempty"`
	// Stalled are the downloads that sent nothing seen again but went
	// silent for a retransmission timeout (200 ms at least) well past
	// what their segments waited: the tail of a flight lost, sent again
	// after the timeout as data the receiver never had, which the wire
	// cannot tell from new (Victim.Stalled). Not in Retransmitted.
	Stalled int `json:"stalled,omitempty"`
	// SRTT is the smoothed RTT of the victims (the local sockets among
	// them) in the seconds before the incident and during it.
	SRTT *ImpactSRTT `json:"srtt,omitempty"`
	// AckWait is how long the victims' packets went unanswered: the
	// longest silence of each one's reverse direction (its ACKs), before
	// the incident and during it. Unlike the srtt, smoothed, it is the
	// wait itself: a segment held behind a burst for 400 ms is not
	// ACKed for 400 ms. Absent in recordings made before it was measured.
	AckWait *ImpactAckWait `json:"ack_wait,omitempty"`
	// SegmentWait is how much longer than usual the victims' segments
	// took to be answered, each one timed by the TCP timestamp its ACK
	// echoed (RFC 7323): the wait of the segment that waited longest, per
	// ACK, where the srtt is smoothed and the ACK wait breaks up as a
	// queue lets the segments out one by one. Absent when no victim's
	// ACKs echoed timestamps in Linux's layout (Windows sends none by
	// default), or in recordings made before it was measured.
	SegmentWait *ImpactSegmentWait `json:"segment_wait,omitempty"`
	// QueuedS is how long the srtt of the victims stayed above its noise
	// (verdict queued), in seconds.
	QueuedS float64 `json:"queued_s,omitempty"`
	// TCPFlows are the TCP flows that moved packets in the incident.
	TCPFlows int `json:"tcp_flows"`
	// SRTTKnown: verdict none rests on srtt (local sockets) or ACK waits
	// measured before and during, not only on nothing sent again.
	SRTTKnown bool `json:"srtt_known,omitempty"`
	// Victims are the flows that paid, those that lost the most first:
	// segments sent again, or an srtt risen above its noise (the first
	// TopFlows of VictimsTotal).
	Victims      []Victim `json:"victims"`
	VictimsTotal int      `json:"victims_total"`
	// FromOffsetS and ToOffsetS are the stretch looked at: the incident
	// and its retransmission tail.
	FromOffsetS float64 `json:"from_offset_s"`
	ToOffsetS   float64 `json:"to_offset_s"`
	// CountedByOffsetS, where set, is the start of the larger incident on
	// the interface whose impact counts every TCP observation of this
	// one's stretch (impactOwner): verdict none, nothing of its own.
	CountedByOffsetS *float64 `json:"counted_by_offset_s,omitempty"`
}

// ImpactRetransmitted counts segments sent again by direction.
type ImpactRetransmitted struct {
	Egress  uint64 `json:"egress"`
	Ingress uint64 `json:"ingress"`
}

// ImpactSRTT is the srtt of the victims before and during an incident,
// in microseconds: the median and 99th percentile over the victims of each
// flow's own value.
type ImpactSRTT struct {
	BeforeP50Us float64 `json:"before_p50_us"`
	BeforeP99Us float64 `json:"before_p99_us"`
	DuringP50Us float64 `json:"during_p50_us"`
	DuringP99Us float64 `json:"during_p99_us"`
	// RiseUs is the largest rise of one victim's srtt over its level
	// before; NoiseUs that victim's noise (how far its srtt moved in the
	// seconds before).
	RiseUs  float64 `json:"rise_us"`
	NoiseUs float64 `json:"noise_us"`
}

// ImpactAckWait is the longest wait of the victims for an answer, in
// microseconds: the largest rise of one victim's over its level before
// (the median of each snapshot's longest silence in the seconds before),
// with that victim's level, noise and wait during.
type ImpactAckWait struct {
	RiseUs   float64 `json:"rise_us"`
	LevelUs  float64 `json:"level_us"`
	NoiseUs  float64 `json:"noise_us"`
	DuringUs float64 `json:"during_us"`
}

// ImpactSegmentWait is the largest rise of one victim's segments' RTT,
// timed by the echoed timestamps, over its usual (the median of the
// least of each snapshot in the seconds before), and that victim's noise
// (how far above it they went in the seconds before: delayed ACKs), in
// microseconds, at the timestamps' 1 ms resolution.
type ImpactSegmentWait struct {
	RiseUs  float64 `json:"rise_us"`
	NoiseUs float64 `json:"noise_us"`
}

// Victim is one flow that paid for an incident.
type Victim struct {
	Flow      string `json:"flow"`
	Direction string `json:"direction"` // the direction its packets were seen in
	Owner     string `json:"owner,omitempty"`
	// Retransmitted are its segments sent again in the span (the local
	// socket's count, or the wire's for a flow without one), beyond its
	// TailProbes and Spurious (D-SACKed) ones.
	Retransmitted uint64 `json:"retransmitted"`
	TailProbes    uint64 `json:"tail_probes,omitempty"`
	Spurious      uint64 `json:"spurious,omitempty"`
	// SRTTBeforeUs is its srtt before the incident (median of the
	// seconds before), SRTTDuringUs the highest during; 0 when it has no
	// local socket or no sample.
	SRTTBeforeUs float64 `json:"srtt_before_us,omitempty"`
	SRTTDuringUs float64 `json:"srtt_during_us,omitempty"`
	// AckWaitBeforeUs is the usual longest silence of its reverse
	// direction (median of the seconds before), AckWaitDuringUs the
	// longest in the span; 0 when unmeasured.
	AckWaitBeforeUs float64 `json:"ack_wait_before_us,omitempty"`
	AckWaitDuringUs float64 `json:"ack_wait_during_us,omitempty"`
	// Stalled: a download whose ACKs went silent for a retransmission
	// timeout, well past its segments' wait (Impact.Stalled).
	Stalled bool `json:"stalled,omitempty"`
	// SegmentWaitUs is how much longer than usual its slowest segment in
	// the span took to be answered (its ACKs' echoed timestamps); 0 when
	// unmeasured.
	SegmentWaitUs float64 `json:"segment_wait_us,omitempty"`
}

// attachImpacts gives every finding of an allowance that queues or drops
// its impact, and makes its severity follow it: nothing lost and no srtt
// risen is info.
func (a *analysis) attachImpacts(fs []Finding) {
	ws := make([]impactWindow, len(fs))
	for i := range fs {
		f := &fs[i]
		if !impactKinds[f.Kind] {
			continue
		}
		fromNs := a.rec.Meta.Start.MonoNs + int64(f.StartOffsetS*1e9)
		toNs := a.rec.Meta.Start.MonoNs + int64(f.EndOffsetS*1e9)
		endNs := toNs + int64(a.opt.ImpactTail)
		if s, ok := largerAfter(fs, i); ok {
			endNs = min(endNs, max(a.rec.Meta.Start.MonoNs+int64(s*1e9), toNs))
		}
		ws[i] = impactWindow{iface: f.Interface, fromNs: fromNs, toNs: toNs, endNs: endNs}
		if f.Incident != nil {
			ws[i].drops = f.Incident.Delta
		}
	}
	for i := range fs {
		f := &fs[i]
		if !impactKinds[f.Kind] {
			continue
		}
		f.Impact = a.impactOf(ws, i)
		switch f.Impact.Verdict {
		case ImpactNone:
			if f.Impact.SRTTKnown || f.Impact.CountedByOffsetS != nil {
				f.Severity = SeverityInfo
			}
		case ImpactQueued:
			if f.Severity == SeverityCritical {
				f.Severity = SeverityWarning
			}
		}
	}
}

// largerAfter is the start (offset, s) of the first incident on fs[i]'s
// interface that began after it ended and counted more than it did: what
// the flows sent again from then on is that one's to account for. The tail
// of a TCP flow's own small overflow 240 ms before a 2 MB burst had counted
// the 82 segments the burst cost, as the burst's own finding did.
func largerAfter(fs []Finding, i int) (float64, bool) {
	f := fs[i]
	if f.Incident == nil {
		return 0, false
	}
	at, ok := 0.0, false
	for _, g := range fs {
		if impactKinds[g.Kind] && g.Interface == f.Interface && g.Incident != nil && g.StartOffsetS >= f.EndOffsetS &&
			g.Incident.Delta > f.Incident.Delta && (!ok || g.StartOffsetS < at) {
			at, ok = g.StartOffsetS, true
		}
	}
	return at, ok
}

// tcpFlow is one TCP flow's snapshots, in time order.
type tcpFlow struct {
	ref   flowRef
	snaps []*record.FlowSnapshot
}

// tcpFlows are the recording's TCP flows, built once.
func (a *analysis) tcpFlows() []tcpFlow {
	if a.impactFlows != nil {
		return *a.impactFlows
	}
	ids := map[flowRef]int{}
	var out []tcpFlow
	for i := range a.rec.Flows {
		s := &a.rec.Flows[i]
		if s.Key.Proto != 6 {
			continue
		}
		ref := flowRef{s.Interface, s.Key}
		id, ok := ids[ref]
		if !ok {
			id = len(out)
			ids[ref] = id
			out = append(out, tcpFlow{ref: ref})
		}
		out[id].snaps = append(out[id].snaps, s)
	}
	for i := range out {
		slices.SortStableFunc(out[i].snaps, func(x, y *record.FlowSnapshot) int { return cmp.Compare(x.TimeNs, y.TimeNs) })
	}
	a.impactFlows = &out
	return out
}

// rose is what a cumulative counter rose by from prev to cur; a counter
// that went down belongs to a new table entry, all of it new.
func rose(prev, cur uint64) uint64 {
	if cur >= prev {
		return cur - prev
	}
	return cur
}

// flowImpact is what one flow did around an incident.
type flowImpact struct {
	ref         flowRef
	active      bool // moved packets in the span
	egress      bool
	retrans     uint64    // segments sent again, tail probes included
	tail        uint64    // tail loss probes among them
	spurious    uint64    // D-SACKed among them: the receiver had them
	before      []float64 // srtt samples of the seconds before (each snapshot's range ends)
	during      float64   // highest srtt in the span
	beforeLevel float64
	noise       float64
	aboveFromNs int64 // the stretch its srtt stayed above its noise
	aboveToNs   int64
	risen       bool
	// The longest silences of its reverse direction (its ACKs): each
	// snapshot's in the seconds before, the longest in the span, their
	// level and noise; waited: the span's above the noise.
	waitBefore           []float64
	waitDuring           float64
	waitLevel, waitNoise float64
	waited               bool
	// The ages of the timestamps its reverse direction echoed
	// (echoAges): the rise of the span's greatest over the usual least,
	// and the noise, in µs; segWaited: the rise above the noise.
	segRise, segNoise float64
	segTimed          bool
	segWaited         bool
	// stalled: a download whose ACKs went silent for a retransmission
	// timeout, well past what its segments waited (stalledPastQueue).
	stalled bool
}

// minRTO is the shortest retransmission timeout of the TCP stacks that
// matter here (Linux's TCP_RTO_MIN; RFC 6298 asks for 1 s, Windows 300
// ms).
const minRTO = 200 * time.Millisecond

// stalledPastQueue says whether a download (a remote sender's flow) went
// silent as a lost tail does. The wire sees a segment sent again only
// when it lands below data it has seen: when the burst and the queue
// behind it take the whole tail of a flight, its tail loss probe too,
// the sender waits out its timeout and sends the tail again as data the
// receiver never had (3 lab runs in 42, their senders' SACK recovery
// none: no segment seen sent again, the ACKs silent 212 ms where the
// segments waited 58 ms more than usual). A queue holds the ACKs back
// only as long as it holds the segments; a silence of a timeout, longer
// by half a timeout than the segments' wait and the usual silence, is
// the sender's.
func (fi flowImpact) stalledPastQueue() bool {
	rto := float64(minRTO / time.Microsecond)
	return !fi.egress && fi.segTimed && fi.waitLevel > 0 && fi.waitDuring >= rto &&
		fi.waitDuring-fi.waitLevel-max(fi.segRise, 0) >= rto/2
}

// rise is how far its srtt or its ACKs' wait rose over their levels, the
// larger.
func (fi flowImpact) rise() float64 {
	r := 0.0
	if fi.beforeLevel > 0 && fi.during > 0 {
		r = fi.during - fi.beforeLevel
	}
	if fi.waitLevel > 0 {
		r = max(r, fi.waitDuring-fi.waitLevel)
	}
	if fi.segTimed {
		r = max(r, fi.segRise)
	}
	return r
}

// impactOf measures the impact of the incident of window ws[k], from its
// start to the end of its retransmission tail: the flows whose
// retransmissions rose in it, and the srtt of the local sockets against
// the seconds before; each observation only where it is this incident's
// to count (impactOwner).
func (a *analysis) impactOf(ws []impactWindow, k int) *Impact {
	iface, fromNs, endNs := ws[k].iface, ws[k].fromNs, ws[k].endNs
	im := &Impact{Victims: []Victim{}, FromOffsetS: a.offsetS(fromNs), ToOffsetS: a.offsetS(endNs)}
	// countedBy is the incident that counts what this one's stretch held
	// and this one does not, -1 for none.
	countedBy := -1
	owns := func(p, t int64) bool {
		o := impactOwner(ws, iface, p, t)
		if o >= 0 && o != k {
			if countedBy < 0 || ws[o].drops > ws[countedBy].drops {
				countedBy = o
			}
			return false
		}
		return true
	}
	if !a.rec.Meta.Impact {
		im.Verdict = ImpactUnknown
		im.Summary = "impact unknown (recorded before impact was measured)"
		return im
	}
	beforeNs := fromNs - int64(a.opt.ImpactBefore)
	tcp := a.tcpFlows()
	byRef := make(map[flowRef]int, len(tcp))
	for i, tf := range tcp {
		byRef[tf.ref] = i
	}
	var flows []flowImpact
	for _, tf := range tcp {
		if tf.ref.iface != iface {
			continue
		}
		fi := flowImpact{ref: tf.ref}
		// The data direction of a connection waits for the other's
		// ACKs; the ACK direction, which sent fewer bytes, is not timed.
		if ri, ok := byRef[flowRef{tf.ref.iface, reverseKey(tf.ref.key)}]; ok && tflowBytes(tf) > tflowBytes(tcp[ri]) {
			fi.waitBefore, fi.waitDuring = silences(tcp[ri].snaps, beforeNs, fromNs, endNs, owns)
			fi.segRise, fi.segNoise, fi.segTimed = echoAges(tcp[ri].snaps, beforeNs, fromNs, endNs, owns)
		}
		var prev record.FlowStats
		var prevNs int64 = math.MinInt64
		// After the span: the D-SACKs read and the segments sent again.
		var laterDSACK, laterResent uint64
		// In the span, the segments sent again by the socket's count and
		// by the wire's, and the tail probes: each counter summed on its
		// own, as the two may count one segment at different snapshots
		// (a CI run of the lab's deep queue: the socket's count rose at
		// one, the wire's at the next, and one segment sent again and
		// D-SACKed was counted twice, one of them lost).
		var local, wire, tail uint64
		for _, s := range tf.snaps {
			from := max(prevNs, s.FirstSeenNs-1)
			inSpan := from < endNs && s.TimeNs > fromNs && owns(from, s.TimeNs)
			if from >= endNs {
				laterDSACK += rose(prev.DSACKLocal, s.DSACKLocal)
				laterResent += rose(prev.RetransLocal, s.RetransLocal)
			}
			if s.TimeNs <= fromNs && s.TimeNs > beforeNs && s.SRTTMaxUs > 0 {
				fi.before = append(fi.before, float64(s.SRTTMinUs), float64(s.SRTTMaxUs))
			}
			if inSpan {
				if rose(prev.Packets, s.Packets) > 0 {
					fi.active = true
				}
				local += rose(prev.RetransLocal, s.RetransLocal)
				wire += rose(prev.RetransWire, s.RetransWire)
				tail += rose(prev.RetransTail, s.RetransTail)
				// The D-SACK comes when the copy arrives, snapshots
				// after the segment was sent again: bounded below, over
				// the span.
				fi.spurious += rose(prev.DSACKLocal, s.DSACKLocal)
				fi.during = max(fi.during, float64(s.SRTTMaxUs))
			}
			fi.egress = fi.egress || hasDirection(s.FlowStats, record.Egress)
			prev, prevNs = s.FlowStats, s.TimeNs
		}
		fi.retrans = max(local, wire)
		fi.tail = min(tail, fi.retrans)
		// A segment the wire counted in the span and the socket only
		// after it (the mirror of the wire's count a snapshot late) is
		// the span's: the socket's later count of it does not make its
		// D-SACK, read later too, a later segment's.
		if wire > local {
			laterResent -= min(laterResent, wire-local)
		}
		// A copy sent again near the span's end arrives behind the queue
		// it was sent again for, up to its wait later: its D-SACK may be
		// read after the span (a CI run of the lab's deep queue: 13 sent
		// again in the span, 11 D-SACKed in it). A D-SACK read later that
		// the flow's later retransmissions cannot account for is one of
		// the span's.
		if laterDSACK > laterResent {
			fi.spurious += laterDSACK - laterResent
		}
		fi.spurious = min(fi.spurious, fi.retrans)
		if !fi.active && fi.retrans == 0 {
			continue
		}
		if len(fi.before) > 0 {
			fi.beforeLevel, fi.noise = levelAndNoise(fi.before, a.opt.ImpactMinRise)
			if fi.during > fi.beforeLevel+fi.noise {
				fi.risen = true
				fi.aboveFromNs, fi.aboveToNs = aboveStretch(tf.snaps, fromNs, endNs, fi.beforeLevel+fi.noise, owns)
			}
		}
		if len(fi.waitBefore) > 0 && fi.waitDuring > 0 {
			fi.waitLevel, fi.waitNoise = levelAndNoise(fi.waitBefore, a.opt.ImpactMinRise)
			// A wait counts past its noise and past a millisecond: the
			// ACKs of a steady flow come every few hundred microseconds.
			fi.waited = fi.waitDuring > fi.waitLevel+max(fi.waitNoise, float64(time.Millisecond/time.Microsecond))
		}
		// Past the noise and past 2 ms: the timestamps tick once a
		// millisecond, and the clock's ms steps are 1.05 ms.
		fi.segWaited = fi.segTimed && fi.segRise > max(fi.segNoise, float64(2*time.Millisecond/time.Microsecond))
		fi.stalled = fi.lost() == 0 && fi.stalledPastQueue()
		flows = append(flows, fi)
	}
	im.TCPFlows = len(flows)
	timed := 0 // flows with an srtt or an ACK wait before and during
	for _, fi := range flows {
		if (fi.beforeLevel > 0 && fi.during > 0) || fi.waitLevel > 0 || fi.segTimed {
			timed++
		}
	}
	im.Retransmitted = a.wireRetrans(iface, fromNs, endNs, owns)
	// Tail loss probes are sent again without a loss: a queue that holds
	// the ACKs back past two srtt sets them off. What a flow lost is what
	// it sent again beyond them.
	var victims []flowImpact
	var lostBy, needlessBy [record.NumDirections]uint64
	for _, fi := range flows {
		if fi.lost() > 0 || fi.risen || fi.waited || fi.segWaited {
			victims = append(victims, fi)
		}
		d := record.Ingress
		if fi.egress {
			d = record.Egress
		}
		lostBy[d] += fi.lost()
		needlessBy[d] += fi.needless()
		im.TailProbes += fi.tail
		im.Spurious += fi.spurious
		if fi.stalled {
			im.Stalled++
		}
	}
	// By direction: the flows' own count where it is the larger (a
	// socket also counts what its qdisc dropped), else the buckets' less
	// the needless (they count flows whose snapshots came too late too).
	im.Retransmitted.Egress = max(im.Retransmitted.Egress-min(im.Retransmitted.Egress, needlessBy[record.Egress]), lostBy[record.Egress])
	im.Retransmitted.Ingress = max(im.Retransmitted.Ingress-min(im.Retransmitted.Ingress, needlessBy[record.Ingress]), lostBy[record.Ingress])

	slices.SortStableFunc(victims, func(x, y flowImpact) int {
		return cmp.Or(cmp.Compare(y.lost(), x.lost()), cmp.Compare(y.rise(), x.rise()))
	})
	im.VictimsTotal = len(victims)
	var before, during []float64
	var srtt ImpactSRTT
	var wait *ImpactAckWait
	var seg *ImpactSegmentWait
	var aboveFrom, aboveTo int64 = math.MaxInt64, math.MinInt64
	for _, fi := range victims {
		if fi.waitLevel > 0 && (wait == nil || fi.waitDuring-fi.waitLevel > wait.RiseUs) {
			wait = &ImpactAckWait{RiseUs: fi.waitDuring - fi.waitLevel, LevelUs: fi.waitLevel, NoiseUs: fi.waitNoise, DuringUs: fi.waitDuring}
		}
		if fi.segTimed && (seg == nil || fi.segRise > seg.RiseUs) {
			seg = &ImpactSegmentWait{RiseUs: fi.segRise, NoiseUs: fi.segNoise}
		}
		if fi.beforeLevel > 0 && fi.during > 0 {
			before = append(before, fi.beforeLevel)
			during = append(during, fi.during)
			if rise := fi.during - fi.beforeLevel; rise > srtt.RiseUs {
				srtt.RiseUs, srtt.NoiseUs = rise, fi.noise
			}
		}
		if fi.risen {
			aboveFrom, aboveTo = min(aboveFrom, fi.aboveFromNs), max(aboveTo, fi.aboveToNs)
		}
	}
	for _, fi := range victims[:min(len(victims), a.opt.TopFlows)] {
		v := Victim{Flow: fi.ref.key.String(), Direction: record.Ingress.String(), Retransmitted: fi.lost(),
			TailProbes: fi.tail, Spurious: fi.spurious, SRTTBeforeUs: fi.beforeLevel, SRTTDuringUs: fi.during,
			AckWaitBeforeUs: fi.waitLevel, AckWaitDuringUs: fi.waitDuring, Stalled: fi.stalled}
		if fi.segTimed {
			v.SegmentWaitUs = max(fi.segRise, 0)
		}
		if fi.egress {
			v.Direction = record.Egress.String()
		}
		if o := a.owners.of(fi.ref); o != nil {
			v.Owner = o.String()
		}
		im.Victims = append(im.Victims, v)
	}
	if len(before) > 0 {
		srtt.BeforeP50Us, srtt.BeforeP99Us = quantile(before, 0.5), quantile(before, 0.99)
		srtt.DuringP50Us, srtt.DuringP99Us = quantile(during, 0.5), quantile(during, 0.99)
		im.SRTT = &srtt
	}
	im.AckWait = wait
	im.SegmentWait = seg
	lost := im.Retransmitted.Egress + im.Retransmitted.Ingress
	switch {
	case lost > 0:
		im.Verdict = ImpactDropped
		im.Summary = fmt.Sprintf("dropped: %d TCP segments sent again (%d egress, %d ingress) by %s",
			lost, im.Retransmitted.Egress, im.Retransmitted.Ingress, flowsText(countRetransmitting(victims)))
		if im.SRTT != nil {
			im.Summary += fmt.Sprintf("; srtt p50 %s before, %s during", fmtUs(srtt.BeforeP50Us), fmtUs(srtt.DuringP50Us))
		}
		if s := stalledText(victims); s != "" {
			im.Summary += "; " + s
		}
	case len(flows) == 0 && countedBy >= 0:
		im.Verdict = ImpactNone
		at := a.offsetS(ws[countedBy].fromNs)
		im.CountedByOffsetS = &at
		im.Summary = fmt.Sprintf("nothing of its own: its TCP flows' losses and waits are counted by the larger incident at +%.3f s", at)
	case len(flows) == 0:
		im.Verdict = ImpactUnknown
		im.Summary = "impact unknown: no TCP in the span; UDP loss cannot be seen here " +
			"(DNS queries sent again show in the link-local detail)"
	case len(victims) > 0:
		im.Verdict = ImpactQueued
		var parts []string
		if seg != nil && seg.RiseUs > 0 {
			parts = append(parts, fmt.Sprintf("segments waited up to %s longer than usual (noise %s; their ACKs' TCP timestamps)", fmtUs(seg.RiseUs), fmtUs(seg.NoiseUs)))
		}
		if wait != nil && wait.RiseUs > 0 {
			parts = append(parts, fmt.Sprintf("ACKs held back up to %s (usually %s)", fmtUs(wait.DuringUs), fmtUs(wait.LevelUs)))
		}
		if aboveTo > aboveFrom {
			im.QueuedS = float64(aboveTo-aboveFrom) / 1e9
			parts = append(parts, fmt.Sprintf("srtt rose by up to %s (noise %s) for %s, p50 %s before, %s during",
				fmtUs(srtt.RiseUs), fmtUs(srtt.NoiseUs), fmtDur(aboveTo-aboveFrom), fmtUs(srtt.BeforeP50Us), fmtUs(srtt.DuringP50Us)))
		}
		im.Summary = "queued: " + strings.Join(parts, "; ")
		if s := stalledText(victims); s != "" {
			im.Summary += "; nothing seen sent again, but " + s
		} else {
			im.Summary += "; nothing lost"
		}
		var sent []string
		if im.TailProbes > 0 {
			sent = append(sent, fmt.Sprintf("%d tail loss probes, set off by the wait", im.TailProbes))
		}
		if im.Spurious > 0 {
			sent = append(sent, fmt.Sprintf("%d segments sent again needlessly, the receiver had them (D-SACK)", im.Spurious))
		}
		if len(sent) > 0 {
			im.Summary += " (" + strings.Join(sent, "; ") + ")"
		}
	case timed == 0:
		im.Verdict = ImpactNone
		im.Summary = fmt.Sprintf("nothing lost (%s sent nothing again); no srtt, ACK wait or TCP timestamps to tell queueing", flowsText(len(flows)))
	default:
		im.Verdict = ImpactNone
		im.SRTTKnown = true
		im.Summary = fmt.Sprintf("queued briefly; nothing lost (%s, the waits of %d within noise)", flowsText(len(flows)), timed)
	}
	return im
}

// stalledText says which victims stalled (flowImpact.stalled), the
// longest first, "" for none.
func stalledText(victims []flowImpact) string {
	var longest *flowImpact
	n := 0
	for i, fi := range victims {
		if fi.stalled {
			n++
			if longest == nil || fi.waitDuring > longest.waitDuring {
				longest = &victims[i]
			}
		}
	}
	if n == 0 {
		return ""
	}
	who := longest.ref.key.String()
	if n > 1 {
		who += fmt.Sprintf(" and %d more", n-1)
	}
	return fmt.Sprintf("%s went silent for %s (its segments waited %s more than usual): as long as a retransmission timeout, "+
		"the tail of its flight likely lost and sent again after it, which the wire cannot tell from new data",
		who, fmtUs(longest.waitDuring), fmtUs(max(longest.segRise, 0)))
}

// flowsText counts TCP flows for people.
func flowsText(n int) string {
	if n == 1 {
		return "1 TCP flow"
	}
	return fmt.Sprintf("%d TCP flows", n)
}

// lost is what a flow sent again beyond its tail loss probes.
func (fi flowImpact) lost() uint64 { return fi.retrans - fi.needless() }

// needless is what a flow sent again without a loss: tail loss probes
// and D-SACKed segments, the larger (a probe sent needlessly is both).
func (fi flowImpact) needless() uint64 { return min(max(fi.tail, fi.spurious), fi.retrans) }

func countRetransmitting(fs []flowImpact) int {
	n := 0
	for _, f := range fs {
		if f.lost() > 0 {
			n++
		}
	}
	return n
}

// levelAndNoise is a flow's srtt level before an incident (the median of
// its samples) and its noise: how far the samples rose above the level,
// at least minRise of the level (a steady srtt still jitters).
func levelAndNoise(samples []float64, minRise float64) (level, noise float64) {
	s := slices.Clone(samples)
	slices.Sort(s)
	level = quantile(s, 0.5)
	return level, max(s[len(s)-1]-level, minRise*level)
}

// aboveStretch is the stretch, within (fromNs, endNs] and the snapshot
// after it (the srtt falls back only once the queue drained), whose
// snapshots saw the srtt above threshold: from the start of the first such
// snapshot's interval to the end of the last.
func aboveStretch(snaps []*record.FlowSnapshot, fromNs, endNs int64, threshold float64, owns func(p, t int64) bool) (int64, int64) {
	first, last := int64(0), int64(0)
	prevNs := int64(math.MinInt64)
	found := false
	for _, s := range snaps {
		if s.TimeNs > fromNs && prevNs < endNs && float64(s.SRTTMaxUs) > threshold && owns(prevNs, s.TimeNs) {
			if !found {
				first = max(prevNs, fromNs)
				found = true
			}
			last = s.TimeNs
		}
		prevNs = s.TimeNs
	}
	return first, last
}

// wireRetrans sums the time buckets' retransmitted segments of iface in
// [fromNs, endNs) that owns says are its, by direction.
func (a *analysis) wireRetrans(iface string, fromNs, endNs int64, owns func(p, t int64) bool) ImpactRetransmitted {
	var out ImpactRetransmitted
	for i := range a.rec.Series {
		s := &a.rec.Series[i]
		if s.Interface != iface {
			continue
		}
		lo := sort.Search(len(s.Buckets), func(j int) bool { return s.Buckets[j].StartNs+s.WidthNs > fromNs })
		var n uint64
		for j := lo; j < len(s.Buckets) && s.Buckets[j].StartNs < endNs; j++ {
			if b := &s.Buckets[j]; b.Retrans > 0 && owns(b.StartNs, b.StartNs+s.WidthNs) {
				n += b.Retrans
			}
		}
		if s.Direction == record.Egress {
			out.Egress += n
		} else {
			out.Ingress += n
		}
	}
	return out
}

// quantile is the q-quantile of v (nearest rank), sorting a copy.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// fmtUs writes a duration given in microseconds for people.
func fmtUs(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func fmtDur(ns int64) string {
	return time.Duration(ns).Round(time.Millisecond).String()
}

// reverseKey is the key of a flow's other direction.
func reverseKey(k record.FlowKey) record.FlowKey {
	return record.FlowKey{Proto: k.Proto, Src: k.Dst, Dst: k.Src}
}

// tflowBytes is what a flow sent over the trace (its latest cumulative
// snapshot).
func tflowBytes(tf tcpFlow) uint64 {
	if len(tf.snaps) == 0 {
		return 0
	}
	return tf.snaps[len(tf.snaps)-1].Bytes
}

// silences are a flow's longest silences from its snapshots: each one's
// in (beforeNs, fromNs], and the longest wait in (fromNs, endNs] and the
// snapshot after (a silence ends at the packet that breaks it, read at the
// next snapshot), in microseconds. A wait is one snapshot's silence, or
// the sum of those of consecutive snapshots each silent for at least a
// quarter of its interval: the answers to a victim's segments queued in
// the middle of a burst come one by one as the queue drains, and break
// one silence into several (lab, deep queue: 30, 92 and 280 ms in three
// snapshots where the probe waited 390 ms).
func silences(snaps []*record.FlowSnapshot, beforeNs, fromNs, endNs int64, owns func(p, t int64) bool) (before []float64, during float64) {
	prevNs := int64(math.MinInt64)
	var chain float64
	for _, s := range snaps {
		gap := float64(s.GapMaxUs)
		switch {
		case s.TimeNs > beforeNs && s.TimeNs <= fromNs:
			if s.GapMaxUs > 0 {
				before = append(before, gap)
			}
		case s.TimeNs > fromNs && prevNs < endNs:
			if !owns(prevNs, s.TimeNs) {
				chain = 0 // another incident's to count
				break
			}
			if prevNs != math.MinInt64 && 4*gap*1e3 >= float64(s.TimeNs-prevNs) {
				chain += gap
			} else {
				chain = 0
			}
			during = max(during, chain, gap)
		}
		prevNs = s.TimeNs
	}
	return before, during
}

// echoAges times a flow's segments by the timestamps its reverse
// direction's ACKs echoed (the snapshots of that direction, ages in ms
// with an offset of the connection's): usual is the median of the least
// age of each snapshot in (beforeNs, fromNs], the rise that of the
// greatest in (fromNs, endNs] and the snapshot after over it, the noise
// how far the greatest of the seconds before went over it, in µs (the
// usual age holds the offset: no share of it means anything). ok is false
// without ages before and during, or when the least ages before drift
// apart by more than 5% of the time between them and 20 ms: the echo is
// not of a millisecond clock (RFC 7323 allows 1 ms to 1 s a tick, and
// Linux µs when a route asks; a 2 ms tick drifts by 50%), and its ages
// would rise with time alone.
func echoAges(snaps []*record.FlowSnapshot, beforeNs, fromNs, endNs int64, owns func(p, t int64) bool) (rise, noise float64, ok bool) {
	var ref uint32 // the ages as signed distances from the first one's least
	var refSet bool
	rel := func(age uint32) float64 {
		if !refSet {
			ref, refSet = age, true
		}
		return float64(record.EchoRiseMs(ref, age))
	}
	var mins, maxes []float64
	var firstNs, lastNs int64 // of the first and last ages before
	during := math.Inf(-1)
	prevNs := int64(math.MinInt64)
	for _, s := range snaps {
		switch {
		case !s.Echoed:
		case s.TimeNs > beforeNs && s.TimeNs <= fromNs:
			lo, hi := rel(s.EchoAgeMinMs), rel(s.EchoAgeMaxMs)
			if len(mins) == 0 {
				firstNs = s.TimeNs
			}
			lastNs = s.TimeNs
			mins, maxes = append(mins, lo), append(maxes, hi)
		case s.TimeNs > fromNs && prevNs < endNs && owns(prevNs, s.TimeNs):
			during = max(during, rel(s.EchoAgeMaxMs))
		}
		prevNs = s.TimeNs
	}
	if len(mins) == 0 || math.IsInf(during, -1) {
		return 0, 0, false
	}
	if d := math.Abs(mins[len(mins)-1] - mins[0]); d > 20 && d > 0.05*float64(lastNs-firstNs)/1e6 {
		return 0, 0, false
	}
	usual := quantile(mins, 0.5)
	noise = slices.Max(maxes) - usual
	return (during - usual) * 1e3, noise * 1e3, true
}
