//go:build linux

package catalog_test

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// runImpact runs an impact scenario and returns its burst's finding of
// kind: the first (most severe) whose span holds the burst's start.
func runImpact(t *testing.T, name, kind string) (analyzer.Finding, catalog.Truth, *record.Recording) {
	t.Helper()
	privtest.RequireRoot(t)
	s, ok := catalog.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	// Each scenario has a premise, without which a run did not make its
	// case and runs again, at most eight times; the assertions stay as
	// they are.
	//
	// The drop scenarios': the burst drops some of the victim's segments,
	// which the victim's own kernel's TcpRetransSegs tells (the
	// container's uploading, dropped; the remote host's sending, inbound:
	// a retransmission elsewhere, an ACK's peer, is not the case), beyond
	// its tail loss probes (TCPLossProbes): a probe is sent when ACKs are
	// late, loss or not, and one run in 60 had the queue hold the
	// download's ACKs back, its one retransmission a probe and nothing
	// dropped (the verdict rightly queued). The
	// upload's burst is paced over 80 ms and drops some in every run;
	// the download's is back to back (impact.go says why). Before the
	// lab's hosts sent one segment per skb (container.go), the remote
	// sender's bunches each took one slot of the shaper's queue, let in
	// whole or dropped whole: the download's burst dropped nothing in
	// about a third of the runs here and in eight runs of eight of one
	// CI run (a faster host). Since, 13 runs of 13 made the case at once.
	//
	// The inbound one's, too: the receiver had data past a hole, so that
	// the wire can see the copy that fills it (the remote sender went
	// into SACK recovery). Where the burst and the queue behind it took
	// the whole tail of its flight, its tail loss probe too, it sent the
	// tail again after its timeout, 200 ms on, as data the receiver had
	// never seen: 3 runs in 42 here (2026-12-05; one kept as
	// testdata/lab/impact-inbound-tail-lost).
	//
	// The queued scenario's: the victim was sending when the queue was at
	// its longest (a write within a tenth of the probe's delay of the
	// probe that waited longest), so that its slowest segment met what
	// the probe met. Beside a CPU-bound process, one run in nine had it
	// silent for about 100 ms there (its ACKs' silence 383 ms, its
	// slowest segment's wait 283 ms, the probe's 387 ms). And the lab's
	// counter moved for the burst alone: in a CI run it rose by 47,
	// 250 ms before the burst, for the victim's own 82 kB bunch, which
	// the analysis rightly made a finding of its own.
	premise := map[string]func(*catalog.Outcome) string{
		"impact-dropped": func(o *catalog.Outcome) string {
			t := o.Truth
			if t.RetransSegs <= t.LossProbes {
				return fmt.Sprintf("the burst dropped none of the victim's segments (%d sent again, %d tail loss probes)", t.RetransSegs, t.LossProbes)
			}
			return ""
		},
		"impact-inbound": func(o *catalog.Outcome) string {
			t := o.Truth
			if t.PeerRetransSegs <= t.PeerLossProbes {
				return fmt.Sprintf("the burst dropped none of the remote sender's segments (%d sent again, %d tail loss probes)", t.PeerRetransSegs, t.PeerLossProbes)
			}
			if t.PeerSackRecoveries == 0 {
				return fmt.Sprintf("the burst dropped only the tail of the remote sender's flight (%d sent again after a timeout, no SACK recovery): the receiver's wire cannot tell those copies from new data", t.PeerRetransSegs)
			}
			return ""
		},
		"impact-queued": func(o *catalog.Outcome) string {
			t := o.Truth
			if t.VictimPeakGap < 0 || t.VictimPeakGap > t.QueueDelay/10 {
				return fmt.Sprintf("the victim's nearest write came %v from the queue's peak, more than a tenth of its %v", t.VictimPeakGap, t.QueueDelay)
			}
			if n := risenBefore(o.Recording, counters.BwOutAllowanceExceeded, t.Bursts[0].StartNs); n > 0 {
				return fmt.Sprintf("the lab's %s rose by %d before the burst began", counters.BwOutAllowanceExceeded, n)
			}
			return ""
		},
	}[name]
	var out *catalog.Outcome
	for attempt := 1; ; attempt++ {
		var err error
		if out, err = catalog.Run(context.Background(), s, capture.DefaultConfig()); err != nil {
			t.Fatal(err)
		}
		why := premise(out)
		if why == "" {
			break
		}
		if attempt == 8 {
			t.Fatalf("in %d runs the lab's scenario never made its case: %s (%v)", attempt, why, out.Truth.Notes)
		}
		t.Logf("run %d: %s (%v); running the scenario again", attempt, why, out.Truth.Notes)
	}
	res := analyzer.Analyze(out.Recording, out.Analysis)
	for _, n := range out.Truth.Notes {
		t.Log(n)
	}
	var found *analyzer.Finding
	for i, f := range res.Findings {
		b := out.Truth.Bursts[0]
		startNs := out.Recording.Meta.Start.MonoNs + int64(f.StartOffsetS*1e9)
		endNs := out.Recording.Meta.Start.MonoNs + int64(f.EndOffsetS*1e9)
		if f.Kind != kind || startNs > b.EndNs || endNs < b.StartNs {
			continue
		}
		found = &res.Findings[i]
		t.Logf("%s %s [%.3f, %.3f] %s", f.Kind, f.Severity, f.StartOffsetS, f.EndOffsetS, f.Summary)
		t.Logf("  impact %s: %s", f.Impact.Verdict, f.Impact.Summary)
		for _, v := range f.Impact.Victims {
			t.Logf("  victim %+v", v)
		}
		break
	}
	// One incident, one finding: the victim's packets, queued behind the
	// burst while its queue drained, are its victims, not the culprits of
	// findings of their own (before the analyzer's drains: 5 or 6 in all,
	// 4 runs of 4 one since). Not yet for the others: after the shallow
	// queue dropped, the victim's recovery, 30 to 170 ms later, runs over
	// the bucket the burst emptied in a few jumps of 2 to 10 packets, and
	// stands as findings of its own (5 runs of 9; 2 of 8 since a jump
	// that joins an incident says whether its queue was full); inbound, more findings
	// came in 6 runs of 8 (2 to 37), and in the one looked into, the lab's
	// counter had moved for the download's own bunches, before the burst
	// too, 4 or 5 packets each.
	above := 0
	for _, f := range res.Findings {
		if f.Kind == kind && f.Severity != analyzer.SeverityInfo {
			above++
		}
	}
	if name == "impact-queued" && above != 1 {
		for _, f := range res.Findings {
			t.Logf("%s %s [%.3f, %.3f] %s", f.Kind, f.Severity, f.StartOffsetS, f.EndOffsetS, f.Summary)
		}
		t.Errorf("%d %s findings above info, want one: the burst's", above, kind)
	}
	if found == nil {
		for _, f := range res.Findings {
			t.Logf("%s %s [%.3f, %.3f] %s", f.Kind, f.Severity, f.StartOffsetS, f.EndOffsetS, f.Summary)
		}
		t.Fatalf("no %s finding naming the burst %s (%d findings)", kind, out.Truth.Culprit, len(res.Findings))
	}
	return *found, out.Truth, out.Recording
}

// risenBefore is how far counter rose in the reads done before ns.
func risenBefore(rec *record.Recording, counter string, ns int64) uint64 {
	first := map[string]uint64{}
	var most uint64
	for _, c := range rec.Counters {
		v, ok := c.Values[counter]
		if !ok || c.AfterNs >= ns {
			continue
		}
		f, seen := first[c.Interface]
		if !seen {
			first[c.Interface] = v
			continue
		}
		most = max(most, v-min(v, f))
	}
	return most
}

// victim finds the impact's victim whose flow is key.
func victim(im *analyzer.Impact, key record.FlowKey) *analyzer.Victim {
	for i := range im.Victims {
		if im.Victims[i].Flow == key.String() {
			return &im.Victims[i]
		}
	}
	return nil
}

// victimTo finds the impact's egress TCP victim toward dst (a forwarded
// flow leaves masqueraded: its source is the instance's).
func victimTo(im *analyzer.Impact, dst netip.AddrPort) *analyzer.Victim {
	for i := range im.Victims {
		if v := &im.Victims[i]; v.Direction == "egress" && strings.HasSuffix(v.Flow, " -> "+dst.String()) && strings.HasPrefix(v.Flow, "tcp ") {
			return v
		}
	}
	return nil
}

// TestImpactDroppedLab: a paced TCP upload from a container beside a UDP
// burst through a shallow queue loses segments; the burst's finding says
// dropped and names the upload with its retransmissions. The wire alone
// sees them (a forwarded flow has no socket on the instance), and over the
// trace they are the kernel's (TcpRetransSegs of the container, within
// 10%): the upload's recovery overshoots again later, incidents of their
// own.
func TestImpactDroppedLab(t *testing.T) {
	f, truth, rec := runImpact(t, "impact-dropped", analyzer.KindMicroburstOut)
	im := f.Impact
	if im.Verdict != analyzer.ImpactDropped {
		t.Fatalf("verdict %s (%s), want dropped", im.Verdict, im.Summary)
	}
	v := victimTo(im, truth.VictimPeer)
	if v == nil {
		t.Fatalf("victim toward %s not named: %+v", truth.VictimPeer, im.Victims)
	}
	if truth.RetransSegs == 0 || v.Retransmitted == 0 {
		t.Fatalf("victim retransmitted %d in the incident, the kernel %d: the burst dropped none of its segments", v.Retransmitted, truth.RetransSegs)
	}
	var total uint64 // the flow's snapshots are cumulative
	for _, s := range rec.Flows {
		if s.Key.String() == v.Flow {
			total = max(total, s.RetransWire)
		}
	}
	if d := math.Abs(float64(total) - float64(truth.RetransSegs)); d > 0.1*float64(truth.RetransSegs) {
		t.Errorf("the trace counted %d retransmissions of the victim, the kernel's TcpRetransSegs rose by %d: more than 10%% apart", total, truth.RetransSegs)
	}
	t.Logf("victim: %d retransmitted in the burst's incident, %d in the trace; the kernel %d", v.Retransmitted, total, truth.RetransSegs)
}

// TestImpactQueuedLab: the same, from a socket of the instance, through a
// deep queue drops nothing; the verdict is queued, naming the upload, its
// srtt and its waits risen above their noise, and what its timeout sent
// again while its segments waited counted as needless. The kernel's srtt
// is smoothed (an eighth of each sample): it rises by a fraction of the
// peak queueing delay the lab's probe measures, logged beside it; the
// segments' wait by their ACKs' timestamps is that delay, within 20%
// (docs/findings.md, Impact).
func TestImpactQueuedLab(t *testing.T) {
	f, truth, rec := runImpact(t, "impact-queued", analyzer.KindMicroburstOut)
	im := f.Impact
	key := record.FlowKey{Proto: 6, Src: truth.Victim, Dst: truth.VictimPeer}
	// The deep queue drops nothing, but the socket sends segments again
	// (a tail probe when ACKs are late: behind the queue, or a delayed ACK
	// of a lone segment later on): the receiver has them twice and says so
	// (D-SACK), which makes them needless, not lost. Over the trace, the
	// socket's retransmissions are the kernel's (the instance's
	// TcpRetransSegs), and D-SACKed.
	var local, dsack, wire, tail uint64 // over the trace: cumulative
	for _, s := range rec.Flows {
		if s.Key == key {
			local, dsack, wire, tail = max(local, s.RetransLocal), max(dsack, s.DSACKLocal), max(wire, s.RetransWire), max(tail, s.RetransTail)
		}
	}
	t.Logf("victim: over the trace the socket's count %d, its D-SACKs %d, the wire's %d (tail %d); the kernel's TcpRetransSegs %d",
		local, dsack, wire, tail, truth.RetransSegs)
	if im.Verdict != analyzer.ImpactQueued {
		// Two of 32 CI runs here read dropped (2026-12-04, mended
		// since; 2026-12-05: 2 sent again over the trace, 1 D-SACKed):
		// what the next must show.
		at := rec.Meta.Start.MonoNs - truth.Bursts[0].StartNs
		t.Logf("the incident: [%+.1f, %+.1f] ms from the burst", float64(at)/1e6+f.StartOffsetS*1e3, float64(at)/1e6+f.EndOffsetS*1e3)
		logRetransHistory(t, rec, key, truth.Bursts[0].StartNs)
		t.Fatalf("verdict %s (%s), want queued", im.Verdict, im.Summary)
	}
	v := victim(im, key)
	if v == nil {
		t.Fatalf("victim %s not named: %+v", key, im.Victims)
	}
	t.Logf("victim: %d sent again needlessly, %d retransmitted, %d tail probes in the incident", v.Spurious, v.Retransmitted, v.TailProbes)
	// The socket is read at its own packets, so the D-SACK of a segment
	// sent again as the upload ends may come after the last read (a CI
	// run: 12 sent again, 11 D-SACKed by the last read): one short.
	if v.Retransmitted != 0 || local != truth.RetransSegs || dsack > local || local-dsack > 1 {
		t.Errorf("victim lost %d segments in the incident; over the trace it sent %d again, %d D-SACKed, the kernel %d: want none lost, all needless but the last at most, the kernel's count",
			v.Retransmitted, local, dsack, truth.RetransSegs)
	}
	rise := (v.SRTTDuringUs - v.SRTTBeforeUs) / 1e6
	if truth.QueueDelay <= 0 || im.SRTT == nil || rise <= im.SRTT.NoiseUs/1e6 {
		t.Fatalf("victim srtt rose by %.1f ms (impact srtt %+v), the probe's queueing delay %v: want both", rise*1e3, im.SRTT, truth.QueueDelay)
	}
	t.Logf("victim srtt rose by %.1f ms; the probe's peak queueing delay %.1f ms", rise*1e3, truth.QueueDelay.Seconds()*1e3)
	// The wait itself: its ACKs held back while its segments queued,
	// within 20% of the probe's delay (the longest any packet waited),
	// where the srtt rises by a fraction of it.
	wait := (v.AckWaitDuringUs - v.AckWaitBeforeUs) / 1e6
	seg := v.SegmentWaitUs / 1e6
	t.Logf("victim's ACKs held back %.1f ms over their usual %.1f ms; its slowest segment answered %.1f ms later than usual (TCP timestamps)",
		wait*1e3, v.AckWaitBeforeUs/1e3, seg*1e3)
	if q := truth.QueueDelay.Seconds(); math.Abs(seg-q) > 0.2*q {
		t.Errorf("victim's segments waited %.1f ms longer than usual (its ACK wait rose by %.1f ms, its srtt by %.1f ms), the probe's queueing delay %.1f ms: more than 20%% apart",
			seg*1e3, wait*1e3, rise*1e3, q*1e3)
	}
}

// TestImpactInboundLab: a paced TCP download from a remote host beside an
// inbound UDP burst through a shallow queue: the burst's finding says
// dropped, names the remote sender's flow on ingress with the
// retransmissions the wire saw. The wire sees a segment sent again only
// when it arrives (one the shaper drops again is not) and ends below the
// highest end already seen (one that fills a lost tail is new to it), so
// over the trace it counts at most the remote kernel's TcpRetransSegs
// (logged beside it: a run saw 12 of 12, another 45 of 87), and the
// segments the veth reordered: a CI run (2026-12-06) counted 12 where the
// kernel sent 11 again, the twelfth among the flow's first ten packets,
// before the burst. The peer's kernel says when its segments arrived out
// of order (lab.TCPCounts.Reorders); each such time allows one more.
func TestImpactInboundLab(t *testing.T) {
	f, truth, rec := runImpact(t, "impact-inbound", analyzer.KindMicroburstIn)
	im := f.Impact
	if im.Verdict != analyzer.ImpactDropped || im.Retransmitted.Ingress == 0 {
		t.Fatalf("impact %s with %d ingress retransmissions (%s), want dropped, some", im.Verdict, im.Retransmitted.Ingress, im.Summary)
	}
	key := record.FlowKey{Proto: 6, Src: truth.VictimPeer, Dst: truth.Victim}
	v := victim(im, key)
	if v == nil || v.Direction != "ingress" || v.Retransmitted == 0 {
		t.Fatalf("remote sender's flow %s not named with its retransmissions: %+v", key, im.Victims)
	}
	var total uint64
	for _, s := range rec.Flows {
		if s.Key == key {
			total = max(total, s.RetransWire)
		}
	}
	if total > truth.PeerRetransSegs+truth.PeerReorders {
		t.Errorf("the trace counted %d retransmissions of the remote sender, more than its kernel's TcpRetransSegs rose by (%d) with the %d times it saw them reordered", total, truth.PeerRetransSegs, truth.PeerReorders)
		logRetransHistory(t, rec, key, truth.Bursts[0].StartNs)
	}
	t.Logf("remote sender: %d retransmitted in the burst's incident, %d in the trace; its kernel %d, reordered %d times", v.Retransmitted, total, truth.PeerRetransSegs, truth.PeerReorders)
}

// logRetransHistory logs what the trace saw of a flow's retransmissions:
// its snapshots (a new entry restarts FirstSeen), the ingress buckets
// that counted some, in ms from the burst's start, and what the datapath
// lost. A CI run once counted 60 where the remote kernel sent 33 again,
// 33 of them in the incident; 35 runs since, 21 with a capture beside,
// saw neither reordering nor a count off the kernel's (docs/findings.md,
// Impact): this is what the next such run must show.
func logRetransHistory(t *testing.T, rec *record.Recording, key record.FlowKey, burstNs int64) {
	t.Helper()
	for _, s := range rec.Flows {
		if s.Key == key {
			t.Logf("  snapshot %+.1f ms: %d packets, first seen %+.1f ms, wire retransmissions %d (tail %d), the socket's %d (D-SACKed %d)",
				float64(s.TimeNs-burstNs)/1e6, s.Packets, float64(s.FirstSeenNs-burstNs)/1e6, s.RetransWire, s.RetransTail, s.RetransLocal, s.DSACKLocal)
		}
	}
	for _, se := range rec.Series {
		if se.Direction != record.Ingress {
			continue
		}
		for _, b := range se.Buckets {
			if b.Retrans > 0 {
				t.Logf("  ingress bucket %+.1f ms: %d retransmissions of %d packets", float64(b.StartNs-burstNs)/1e6, b.Retrans, b.Packets)
			}
		}
	}
	for _, l := range rec.Loss {
		t.Logf("  loss %+v", l)
	}
}
