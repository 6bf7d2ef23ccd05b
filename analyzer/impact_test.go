package analyzer

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestImpactOldRecordings: every finding of an allowance that queues or
// drops carries an impact, and in the recordings of testdata, made before
// impact was measured, it says so and leaves the severity alone.
func TestImpactOldRecordings(t *testing.T) {
	entries, err := os.ReadDir(recordingsDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".rec.gz")
		if !ok {
			continue
		}
		rec, err := record.ReadFile(recordingPath(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Analyze(rec, DefaultOptions()).Findings {
			switch {
			case impactKinds[f.Kind] && f.Impact == nil:
				t.Errorf("%s: %s finding without an impact", name, f.Kind)
			case !impactKinds[f.Kind] && f.Impact != nil:
				t.Errorf("%s: %s finding with an impact", name, f.Kind)
			case f.Impact != nil:
				seen++
				if f.Impact.Verdict != ImpactUnknown || f.Impact.Summary != "impact unknown (recorded before impact was measured)" {
					t.Errorf("%s: %s impact %q %q, want unknown, recorded before", name, f.Kind, f.Impact.Verdict, f.Impact.Summary)
				}
			}
		}
	}
	if seen < 4 {
		t.Fatalf("%d findings with an impact in testdata, want one of each kind at least", seen)
	}
}

// impactCase is the microburst_out recording with TCP flows added around
// its incident, made as if impact had been measured.
type impactCase struct {
	rec          *record.Recording
	iface        string
	fromNs, toNs int64
	severity     string
}

func newImpactCase(t *testing.T) *impactCase {
	t.Helper()
	rec, err := record.ReadFile(recordingPath("microburst_out"))
	if err != nil {
		t.Fatal(err)
	}
	var f *Finding
	for _, g := range Analyze(rec, DefaultOptions()).Findings {
		if g.Kind == KindMicroburstOut {
			f = &g
			break
		}
	}
	if f == nil {
		t.Fatal("no microburst_out finding in microburst_out")
	}
	rec.Meta.Impact = true
	start := rec.Meta.Start.MonoNs
	return &impactCase{rec: rec, iface: f.Interface, severity: f.Severity,
		fromNs: start + int64(f.StartOffsetS*1e9), toNs: start + int64(f.EndOffsetS*1e9)}
}

var (
	victimKey = record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.5:40000"), Dst: netip.MustParseAddrPort("10.0.9.9:443")}
	replyKey  = record.FlowKey{Proto: 6, Src: victimKey.Dst, Dst: victimKey.Src}
)

// addFlow adds snapshots of a flow every 100 ms from 3 s before the
// incident to 2 s after it; at(ns) gives the snapshot's impact fields
// (cumulative retransmissions, the srtt range of its interval).
func (c *impactCase) addFlow(key record.FlowKey, dir record.Direction, at func(ns int64) (retransLocal, retransWire uint64, srttMin, srttMax uint32)) {
	c.addFlowTail(key, dir, func(ns int64) (uint64, uint64, uint64, uint32, uint32) {
		l, w, lo, hi := at(ns)
		return l, w, 0, lo, hi
	})
}

// addFlowTail is addFlow with tail loss probes.
func (c *impactCase) addFlowTail(key record.FlowKey, dir record.Direction, at func(ns int64) (retransLocal, retransWire, tail uint64, srttMin, srttMax uint32)) {
	first := c.fromNs - 3*int64(time.Second)
	var packets uint64
	for ns := first; ns <= c.toNs+2*int64(time.Second); ns += 100 * int64(time.Millisecond) {
		packets += 200
		local, wire, tail, lo, hi := at(ns)
		c.rec.Flows = append(c.rec.Flows, record.FlowSnapshot{TimeNs: ns, Interface: c.iface, Key: key,
			FlowStats: record.FlowStats{Packets: packets, Bytes: packets * 1500, Directions: 1 << dir,
				FirstSeenNs: first - 1, LastSeenNs: ns - 1, MinSize: 52, MaxSize: 1500,
				RetransLocal: local, RetransWire: wire, RetransTail: tail, SRTTMinUs: lo, SRTTMaxUs: hi}})
	}
}

// addUpload adds an upload (victimKey, 1500 B segments) and its ACKs
// (replyKey, 52 B) at the times of addFlow; at(ns) gives each one's
// impact fields (the silence, the echo ages), the counters its own.
func (c *impactCase) addUpload(at func(ns int64) (data, acks record.FlowStats)) {
	c.addTransfer(victimKey, record.Egress, at)
}

// addDownload is addUpload the other way: a remote sender's segments
// (replyKey) come in, this host's ACKs (victimKey) go out.
func (c *impactCase) addDownload(at func(ns int64) (data, acks record.FlowStats)) {
	c.addTransfer(replyKey, record.Ingress, at)
}

// addTransfer adds the data flow key, seen in direction dir, and its
// ACKs, for addUpload and addDownload.
func (c *impactCase) addTransfer(key record.FlowKey, dir record.Direction, at func(ns int64) (data, acks record.FlowStats)) {
	back := record.Ingress
	if dir == record.Ingress {
		back = record.Egress
	}
	first := c.fromNs - 3*int64(time.Second)
	var n uint64
	for ns := first; ns <= c.toNs+2*int64(time.Second); ns += 100 * int64(time.Millisecond) {
		n += 100
		d, a := at(ns)
		d.Packets, d.Bytes, d.Directions, d.MinSize, d.MaxSize = 2*n, 2*n*1500, 1<<dir, 1500, 1500
		a.Packets, a.Bytes, a.Directions, a.MinSize, a.MaxSize = n, n*52, 1<<back, 52, 52
		for _, s := range []*record.FlowStats{&d, &a} {
			s.FirstSeenNs, s.LastSeenNs = first-1, ns-1
		}
		c.rec.Flows = append(c.rec.Flows,
			record.FlowSnapshot{TimeNs: ns, Interface: c.iface, Key: key, FlowStats: d},
			record.FlowSnapshot{TimeNs: ns, Interface: c.iface, Key: reverseKey(key), FlowStats: a})
	}
}

func (c *impactCase) finding(t *testing.T) Finding {
	t.Helper()
	for _, f := range Analyze(c.rec, DefaultOptions()).Findings {
		if f.Kind == KindMicroburstOut {
			if f.Impact == nil {
				t.Fatal("microburst_out without an impact")
			}
			return f
		}
	}
	t.Fatal("the microburst_out finding is gone")
	return Finding{}
}

// jitter is a steady srtt around 1 ms, moving by up to 40 µs.
func jitter(ns int64) (uint32, uint32) {
	d := uint32(ns/int64(time.Millisecond)) % 5 * 10
	return 980 + d, 1000 + d
}

func TestImpactDropped(t *testing.T) {
	c := newImpactCase(t)
	c.rec.Owners = append(c.rec.Owners, record.FlowOwner{Interface: c.iface, Key: victimKey,
		Owner: record.Owner{PID: 4121, Comm: "java", How: "socket"}})
	// The local socket retransmits 40 segments 300 ms after the burst
	// began (the RTO), its srtt rising to 9 ms; the remote sender of the
	// reply flow sends 7 again, which the wire and the buckets see.
	rto := c.fromNs + 300*int64(time.Millisecond)
	c.addFlow(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
		lo, hi := jitter(ns)
		if ns >= rto {
			return 40, 38, lo, hi
		}
		if ns > c.fromNs && ns < rto {
			return 0, 0, lo, 9000
		}
		return 0, 0, lo, hi
	})
	c.addFlow(replyKey, record.Ingress, func(ns int64) (uint64, uint64, uint32, uint32) {
		if ns >= rto {
			return 0, 7, 0, 0
		}
		return 0, 0, 0, 0
	})
	addBucketRetrans(t, c.rec, c.iface, record.Ingress, rto-int64(time.Millisecond), 7)
	// A retransmission long after the incident's tail is not its.
	addBucketRetrans(t, c.rec, c.iface, record.Ingress, c.toNs+5*int64(time.Second), 3)

	f := c.finding(t)
	im := f.Impact
	if im.Verdict != ImpactDropped {
		t.Fatalf("verdict %q (%s), want dropped", im.Verdict, im.Summary)
	}
	if im.Retransmitted.Egress != 40 || im.Retransmitted.Ingress != 7 {
		t.Errorf("retransmitted %+v, want egress 40 (the socket's count) ingress 7", im.Retransmitted)
	}
	if im.VictimsTotal != 2 || len(im.Victims) != 2 {
		t.Fatalf("victims %+v (total %d), want the flow and its reply", im.Victims, im.VictimsTotal)
	}
	v := im.Victims[0]
	if v.Flow != victimKey.String() || v.Direction != "egress" || v.Retransmitted != 40 || v.Owner != "java[4121]" {
		t.Errorf("first victim %+v, want %s egress 40 by java[4121]", v, victimKey)
	}
	if v.SRTTBeforeUs < 980 || v.SRTTBeforeUs > 1040 || v.SRTTDuringUs != 9000 {
		t.Errorf("victim srtt before %v during %v, want about 1 ms and 9 ms", v.SRTTBeforeUs, v.SRTTDuringUs)
	}
	if r := im.Victims[1]; r.Flow != replyKey.String() || r.Direction != "ingress" || r.Retransmitted != 7 || r.Owner != "java[4121]" {
		t.Errorf("second victim %+v, want the reply flow, ingress, 7, its socket's owner", r)
	}
	if f.Severity != c.severity {
		t.Errorf("severity %s, want the finding's own %s", f.Severity, c.severity)
	}
	if !strings.Contains(im.Summary, "47 TCP segments sent again (40 egress, 7 ingress)") {
		t.Errorf("summary %q", im.Summary)
	}
}

func TestImpactQueued(t *testing.T) {
	c := newImpactCase(t)
	// The srtt rises to 6 ms for the 300 ms after the burst began; the
	// wait sets off one tail loss probe, nothing else is sent again.
	c.addFlowTail(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint64, uint32, uint32) {
		lo, hi := jitter(ns)
		switch {
		case ns > c.fromNs && ns <= c.fromNs+300*int64(time.Millisecond):
			return 3, 1, 1, lo, 6000 // the socket's 2 are from before the incident
		case ns > c.fromNs:
			return 3, 1, 1, lo, hi
		}
		return 2, 0, 0, lo, hi
	})
	f := c.finding(t)
	im := f.Impact
	if im.Verdict != ImpactQueued {
		t.Fatalf("verdict %q (%s), want queued", im.Verdict, im.Summary)
	}
	if im.SRTT == nil || math.Abs(im.SRTT.RiseUs-5000) > 50 || im.SRTT.DuringP50Us != 6000 {
		t.Errorf("srtt %+v, want a rise of about 5 ms to 6 ms", im.SRTT)
	}
	if im.QueuedS < 0.2 || im.QueuedS > 0.4 {
		t.Errorf("queued for %.3f s, want about 0.3", im.QueuedS)
	}
	if len(im.Victims) != 1 || im.Victims[0].Retransmitted != 0 || im.Victims[0].TailProbes != 1 || im.TailProbes != 1 {
		t.Errorf("victims %+v, tail probes %d: want the flow, nothing retransmitted but one tail probe", im.Victims, im.TailProbes)
	}
	if f.Severity == SeverityCritical || f.Severity == SeverityInfo {
		t.Errorf("severity %s, want at most a warning and not info", f.Severity)
	}
	if !strings.Contains(im.Summary, "nothing lost") {
		t.Errorf("summary %q", im.Summary)
	}
}

func TestImpactNothingLost(t *testing.T) {
	c := newImpactCase(t)
	c.addFlow(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
		lo, hi := jitter(ns)
		return 0, 0, lo, hi
	})
	f := c.finding(t)
	if f.Impact.Verdict != ImpactNone || !strings.HasPrefix(f.Impact.Summary, "queued briefly; nothing lost") {
		t.Fatalf("impact %q %q, want none, queued briefly", f.Impact.Verdict, f.Impact.Summary)
	}
	if f.Severity != SeverityInfo || len(f.Impact.Victims) != 0 || !f.Impact.SRTTKnown {
		t.Errorf("severity %s, victims %+v, srtt known %v: want info, none, known", f.Severity, f.Impact.Victims, f.Impact.SRTTKnown)
	}
}

// TestImpactNoSRTT: TCP flows that sent nothing again but have no local
// socket's srtt (the recording's own, forwarded or inbound) lost nothing,
// and cannot tell queueing: the severity stays.
func TestImpactNoSRTT(t *testing.T) {
	c := newImpactCase(t)
	f := c.finding(t)
	if f.Impact.Verdict != ImpactNone || f.Impact.SRTTKnown || !strings.Contains(f.Impact.Summary, "no srtt, ACK wait or TCP timestamps") {
		t.Fatalf("impact %+v, want none without srtt", f.Impact)
	}
	if f.Impact.TCPFlows == 0 || f.Severity != c.severity {
		t.Errorf("tcp flows %d severity %s, want some and the finding's own %s", f.Impact.TCPFlows, f.Severity, c.severity)
	}
}

func TestImpactNoTCP(t *testing.T) {
	c := newImpactCase(t)
	var udp []record.FlowSnapshot
	for _, s := range c.rec.Flows {
		if s.Key.Proto != 6 {
			udp = append(udp, s)
		}
	}
	c.rec.Flows = udp
	f := c.finding(t)
	if f.Impact.Verdict != ImpactUnknown || !strings.Contains(f.Impact.Summary, "no TCP in the span") {
		t.Fatalf("impact %q %q, want unknown, no TCP", f.Impact.Verdict, f.Impact.Summary)
	}
	if f.Severity != c.severity {
		t.Errorf("severity %s, want the finding's own %s", f.Severity, c.severity)
	}
}

// addBucketRetrans adds n retransmitted segments to the bucket of iface and
// dir holding ns, making the bucket if there is none.
func addBucketRetrans(t *testing.T, rec *record.Recording, iface string, dir record.Direction, ns int64, n uint64) {
	t.Helper()
	for i := range rec.Series {
		s := &rec.Series[i]
		if s.Interface != iface || s.Direction != dir {
			continue
		}
		start := ns - ns%s.WidthNs
		for j := range s.Buckets {
			if s.Buckets[j].StartNs == start {
				s.Buckets[j].Retrans += n
				return
			}
			if s.Buckets[j].StartNs > start {
				s.Buckets = append(s.Buckets[:j], append([]record.Bucket{{StartNs: start, Packets: n, Bytes: n * 1500, Retrans: n}}, s.Buckets[j:]...)...)
				return
			}
		}
		s.Buckets = append(s.Buckets, record.Bucket{StartNs: start, Packets: n, Bytes: n * 1500, Retrans: n})
		return
	}
	t.Fatalf("no %s %s series", iface, dir)
}

// TestImpactAckWait: a forwarded upload (no local socket, so no srtt)
// whose ACKs, which come within about a millisecond of each other before
// the incident, stop for 400 ms from it on, in three silences of
// successive snapshots (40, 120 and 240 ms; one ACK between them): queued, the upload the victim with
// its wait, the ACK flow itself not one; the same ACKs within their noise
// tell nothing lost, srtt known or not.
func TestImpactAckWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waitUs  uint32
		verdict string
	}{{"held back", 400_000, ImpactQueued}, {"within noise", 3_000, ImpactNone}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newImpactCase(t)
			c.addUpload(func(ns int64) (record.FlowStats, record.FlowStats) {
				gap := 800 + uint32(ns/int64(time.Millisecond))%5*100 // 800 to 1200 µs
				// The wait comes in three silences, as the answers to
				// segments queued part way through a burst break it.
				for k, share := range []uint32{1, 3, 6} {
					if at := c.fromNs + int64(k)*100*int64(time.Millisecond); ns > at && ns-100*int64(time.Millisecond) <= at {
						gap = max(gap, tc.waitUs*share/10)
					}
				}
				return record.FlowStats{GapMaxUs: 900}, record.FlowStats{GapMaxUs: gap}
			})
			f := c.finding(t)
			im := f.Impact
			if im.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%s), want %s", im.Verdict, im.Summary, tc.verdict)
			}
			if tc.verdict == ImpactNone {
				if !im.SRTTKnown || len(im.Victims) != 0 || f.Severity != SeverityInfo {
					t.Errorf("impact %+v severity %s: want none from the ACK waits, no victim, info", im, f.Severity)
				}
				return
			}
			if im.AckWait == nil || im.AckWait.DuringUs != float64(tc.waitUs) || im.AckWait.LevelUs < 800 || im.AckWait.LevelUs > 1200 {
				t.Fatalf("ack wait %+v, want %d µs during over a level of about 1 ms", im.AckWait, tc.waitUs)
			}
			if len(im.Victims) != 1 || im.Victims[0].Flow != victimKey.String() || im.Victims[0].AckWaitDuringUs != float64(tc.waitUs) {
				t.Errorf("victims %+v, want the upload alone, waited %d µs", im.Victims, tc.waitUs)
			}
			if !strings.Contains(im.Summary, "ACKs held back up to 400.0 ms") {
				t.Errorf("summary %q: want the wait", im.Summary)
			}
		})
	}
}

// TestImpactSegmentWait: an upload's segments timed by the timestamps its
// ACKs echo. Ages hold the connection's offset (here near the wrap of
// 32 bits, so they cross it): only their rise means anything. A segment
// answered 390 ms later than usual makes the verdict queued with that
// wait; one within the delayed ACKs of the seconds before does not; an
// echo of a clock that is not in ms (its ages climbing with time) is not
// read at all.
func TestImpactSegmentWait(t *testing.T) {
	const offset = uint32(0xffffffff - 150) // ms
	for _, tc := range []struct {
		name    string
		waitMs  uint32
		tickNs  int64 // the echoed clock's tick
		verdict string
		timed   bool
	}{
		{"queued", 390, 1e6, ImpactQueued, true},
		{"within delayed ACKs", 30, 1e6, ImpactNone, true},
		{"a 10 ms clock", 390, 10e6, ImpactNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newImpactCase(t)
			first := c.fromNs - 3*int64(time.Second)
			c.addUpload(func(ns int64) (record.FlowStats, record.FlowStats) {
				// The RTT is 1 ms; a delayed ACK adds up to 40.
				lo := offset + 1
				wait := uint32(40)
				if ns > c.fromNs && ns-100*int64(time.Millisecond) <= c.fromNs+300*int64(time.Millisecond) {
					wait = max(wait, tc.waitMs)
				}
				hi := lo + wait
				// A coarser echoed clock: the sender's timestamps fall
				// behind ours by all but one tick in each.
				drift := uint32((ns - first) / int64(time.Millisecond) * (tc.tickNs - 1e6) / tc.tickNs)
				return record.FlowStats{}, record.FlowStats{Echoed: true, EchoAgeMinMs: lo + drift, EchoAgeMaxMs: hi + drift}
			})
			f := c.finding(t)
			im := f.Impact
			if im.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%s), want %s", im.Verdict, im.Summary, tc.verdict)
			}
			if !tc.timed {
				if im.SegmentWait != nil || im.SRTTKnown {
					t.Errorf("segment wait %+v, srtt known %v from an echo that is not in ms", im.SegmentWait, im.SRTTKnown)
				}
				return
			}
			if tc.verdict == ImpactNone {
				if !im.SRTTKnown || len(im.Victims) != 0 || f.Severity != SeverityInfo {
					t.Errorf("impact %+v severity %s: want none from the timestamps, no victim, info", im, f.Severity)
				}
				return
			}
			// Usual: the median least age; noise: the delayed ACKs, 40 ms
			// over it.
			sw := im.SegmentWait
			if sw == nil || math.Abs(sw.NoiseUs-40_000) > 500 || math.Abs(sw.RiseUs-float64(tc.waitMs)*1e3) > 500 {
				t.Fatalf("segment wait %+v, want a rise of %d ms over noise of about 40 ms", sw, tc.waitMs)
			}
			if len(im.Victims) != 1 || im.Victims[0].Flow != victimKey.String() || math.Abs(im.Victims[0].SegmentWaitUs-sw.RiseUs) > 1 {
				t.Errorf("victims %+v, want the upload alone, waited %.0f µs", im.Victims, sw.RiseUs)
			}
			if !strings.Contains(im.Summary, "segments waited up to 390.0 ms longer than usual") {
				t.Errorf("summary %q: want the segments' wait", im.Summary)
			}
		})
	}
}

// TestImpactStalled: a download whose flight's tail the burst and its
// queue took whole sends nothing the wire can see again (the copies come
// after the sender's timeout, above all it had seen); its ACKs went
// silent for 212 ms where its segments waited 58 ms more than usual (a
// lab run). Nothing seen sent again, but the report says the silence is
// a timeout's, not the queue's: the verdict queued, the flow stalled. A
// queue that held the segments as long, a silence shorter than a
// timeout, or an upload (its socket counts what it sends again) is no
// stall.
func TestImpactStalled(t *testing.T) {
	const offset = uint32(1 << 20) // ms
	for _, tc := range []struct {
		name          string
		silenceMs     uint32
		segWaitMs     uint32
		upload, stall bool
	}{
		{"tail lost", 212, 58, false, true},
		{"queue held it", 212, 200, false, false},
		{"shorter than a timeout", 150, 10, false, false},
		{"upload", 212, 58, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newImpactCase(t)
			add := c.addDownload
			if tc.upload {
				add = c.addUpload
			}
			add(func(ns int64) (record.FlowStats, record.FlowStats) {
				// Usually: ACKs 2 to 3 ms apart at most, the RTT 1 ms, a
				// delayed ACK up to 3 ms more.
				gap := 2000 + uint32(ns/int64(time.Millisecond))%5*200
				wait := uint32(3)
				if ns > c.fromNs && ns-100*int64(time.Millisecond) <= c.fromNs {
					gap, wait = tc.silenceMs*1000, tc.segWaitMs
				}
				return record.FlowStats{}, record.FlowStats{GapMaxUs: gap, Echoed: true, EchoAgeMinMs: offset + 1, EchoAgeMaxMs: offset + 1 + wait}
			})
			im := c.finding(t).Impact
			if im.Verdict != ImpactQueued {
				t.Fatalf("verdict %s (%s), want queued", im.Verdict, im.Summary)
			}
			if len(im.Victims) != 1 {
				t.Fatalf("victims %+v, want the transfer alone", im.Victims)
			}
			said := strings.Contains(im.Summary, fmt.Sprintf("went silent for %d.0 ms (its segments waited %d.0 ms more than usual)", tc.silenceMs, tc.segWaitMs))
			if (im.Stalled == 1) != tc.stall || im.Victims[0].Stalled != tc.stall || said != tc.stall || strings.HasSuffix(im.Summary, "nothing lost") == tc.stall {
				t.Errorf("stalled %d, victim %+v, summary %q: want stalled %v", im.Stalled, im.Victims[0], im.Summary, tc.stall)
			}
		})
	}
}

// TestImpactStalledLab: the lab run TestImpactStalled follows
// (impact-inbound, 2026-12-05): the burst and its queue took the whole
// tail of the download's flight and its tail loss probe; its sender sent
// 10 segments again after its timeout, none of which the wire could
// tell from new data. Both ways, the burst's finding reads queued, the
// download stalled.
func TestImpactStalledLab(t *testing.T) {
	rec, truth, opts := labCase(t, "impact-inbound-tail-lost")
	download := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.98.0.2:36021"), Dst: netip.MustParseAddrPort("198.18.0.10:47264")}
	b := truth.Bursts[0]
	for _, o := range opts {
		var im *Impact
		for _, f := range Analyze(rec, o.opt).Findings {
			startNs := rec.Meta.Start.MonoNs + int64(f.StartOffsetS*1e9)
			if f.Kind == KindMicroburstIn && startNs <= b.EndNs && f.Impact != nil {
				im = f.Impact
				break
			}
		}
		if im == nil {
			t.Fatalf("%s: no microburst_in finding over the burst", o.name)
		}
		if im.Verdict != ImpactQueued || im.Stalled != 1 || len(im.Victims) == 0 || im.Victims[0].Flow != download.String() || !im.Victims[0].Stalled {
			t.Errorf("%s: impact %s, %d stalled, victims %+v (%s): want queued, the download stalled", o.name, im.Verdict, im.Stalled, im.Victims, im.Summary)
		}
	}
}

// TestImpactSpurious: a local socket's timeout fires while its segment
// waits in a queue, and sends it again; the receiver, which got both,
// says so with a D-SACK. Nothing was lost: the verdict is queued, the
// segment counted as sent needlessly, not as retransmitted. A second
// flow's real loss beside it still reads dropped. A segment sent again
// near the span's end is D-SACKed after it, when its copy has come
// through the queue: still needless; but not where the D-SACK read after
// the span is the one of a segment sent again after it.
func TestImpactSpurious(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		// When the segment is sent again and D-SACKed, from the
		// incident's start (or its end: late); laterMs, where not 0,
		// another sent again and D-SACKed 100 ms on, from its end.
		rtoMs, dsackMs int64
		late           bool
		laterMs        int64
		lossy          bool
		verdict        string
		spurious       uint64
		// wireMs, where not 0, is how much later than the socket's own
		// count the wire's counts the segment sent again: another
		// snapshot's.
		wireMs int64
		// localMs, where not 0, is how much later than the wire's
		// count the socket's own counts it.
		localMs int64
	}{
		{name: "needless only", rtoMs: 200, dsackMs: 400, verdict: ImpactQueued, spurious: 1},
		{name: "counted by the wire a snapshot later", rtoMs: 200, dsackMs: 400, wireMs: 100, verdict: ImpactQueued, spurious: 1},
		{name: "beside a loss", rtoMs: 200, dsackMs: 400, lossy: true, verdict: ImpactDropped, spurious: 1},
		{name: "D-SACK read after the span", rtoMs: 900, dsackMs: 1300, late: true, verdict: ImpactQueued, spurious: 1},
		{name: "counted by the socket after the span", rtoMs: 900, dsackMs: 1300, late: true, localMs: 300, verdict: ImpactQueued, spurious: 1},
		{name: "a later segment's own D-SACK", rtoMs: 900, dsackMs: 1300, late: true, laterMs: 1400, verdict: ImpactDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newImpactCase(t)
			base := c.fromNs
			if tc.late {
				base = c.toNs
			}
			rto, dsack := base+tc.rtoMs*ms, base+tc.dsackMs*ms
			if tc.laterMs != 0 {
				// The segment sent again in the span is never D-SACKed.
				dsack = math.MaxInt64
			}
			later := c.toNs + tc.laterMs*ms
			c.addFlow(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
				lo, hi := jitter(ns)
				var n, wire uint64
				if ns >= rto+tc.localMs*ms {
					n++
				}
				if ns >= rto+tc.wireMs*ms {
					wire++
				}
				if tc.laterMs != 0 && ns >= later {
					n++
					wire++
				}
				switch {
				case n > 0 || wire > 0:
					return n, wire, lo, 60_000
				case ns > c.fromNs:
					return 0, 0, lo, 40_000
				}
				return 0, 0, lo, hi
			})
			for i := range c.rec.Flows {
				if s := &c.rec.Flows[i]; s.Key == victimKey {
					if s.TimeNs >= dsack {
						s.DSACKLocal = 1
					}
					if tc.laterMs != 0 && s.TimeNs >= later+100*ms {
						s.DSACKLocal = 1
					}
				}
			}
			addBucketRetrans(t, c.rec, c.iface, record.Egress, rto, 1)
			other := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.5:40001"), Dst: victimKey.Dst}
			if tc.lossy {
				c.addFlow(other, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
					if ns >= rto {
						return 5, 5, 900, 1000
					}
					return 0, 0, 900, 1000
				})
				addBucketRetrans(t, c.rec, c.iface, record.Egress, rto, 5)
			}
			im := c.finding(t).Impact
			if im.Verdict != tc.verdict || im.Spurious != tc.spurious {
				t.Fatalf("verdict %s, spurious %d (%s), want %s, %d", im.Verdict, im.Spurious, im.Summary, tc.verdict, tc.spurious)
			}
			v := victimOf(im, victimKey)
			if v == nil || v.Spurious != tc.spurious || v.Retransmitted != 1-tc.spurious {
				t.Fatalf("victim %+v, want the flow, %d sent needlessly, %d retransmitted", v, tc.spurious, 1-tc.spurious)
			}
			switch {
			case tc.lossy:
				if im.Retransmitted.Egress != 5 {
					t.Errorf("retransmitted %+v, want the other flow's 5 alone", im.Retransmitted)
				}
			case tc.verdict == ImpactQueued:
				if im.Retransmitted.Egress != 0 || !strings.Contains(im.Summary, "1 segments sent again needlessly, the receiver had them (D-SACK)") {
					t.Errorf("retransmitted %+v, summary %q: want none, the needless one named", im.Retransmitted, im.Summary)
				}
			}
		})
	}
}

// victimOf is the impact's victim of flow k, nil when it names none.
func victimOf(im *Impact, k record.FlowKey) *Victim {
	for i := range im.Victims {
		if im.Victims[i].Flow == k.String() {
			return &im.Victims[i]
		}
	}
	return nil
}

// TestImpactTailEndsAtLargerIncident: a small incident 500 ms before the
// burst looks for its retransmissions over the second after it, where the
// socket sends 40 segments again 300 ms into the burst: they are the
// burst's, and the small one's tail ends where the burst begins. A smaller
// incident after the burst does not cut the burst's.
func TestImpactTailEndsAtLargerIncident(t *testing.T) {
	c := newImpactCase(t)
	rto := c.fromNs + 300*int64(time.Millisecond)
	c.addFlow(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
		lo, hi := jitter(ns)
		if ns >= rto {
			return 40, 38, lo, hi
		}
		return 0, 0, lo, hi
	})
	burst := c.finding(t)
	if burst.Impact.Retransmitted.Egress != 40 || burst.Incident == nil || burst.Incident.Delta < 2 {
		t.Fatalf("the burst's finding: %+v, incident %+v", burst.Impact, burst.Incident)
	}
	small := func(from, to float64) Finding {
		return Finding{Kind: KindMicroburstOut, Interface: c.iface, StartOffsetS: from, EndOffsetS: to,
			Incident: &Incident{Delta: burst.Incident.Delta / 2}}
	}
	a := newAnalysis(c.rec, DefaultOptions())
	before := []Finding{small(burst.StartOffsetS-0.5, burst.StartOffsetS-0.4), burst}
	a.attachImpacts(before)
	if im := before[0].Impact; im.Verdict == ImpactDropped || im.Retransmitted.Egress != 0 {
		t.Errorf("the incident before the burst: %s, %d sent again, want none of the burst's (%s)", im.Verdict, im.Retransmitted.Egress, im.Summary)
	}
	if im := before[1].Impact; im.Retransmitted.Egress != 40 {
		t.Errorf("the burst beside an incident before it: %d sent again, want 40 (%s)", im.Retransmitted.Egress, im.Summary)
	}
	after := []Finding{burst, small(burst.EndOffsetS+0.05, burst.EndOffsetS+0.1)}
	a.attachImpacts(after)
	if im := after[0].Impact; im.Retransmitted.Egress != 40 {
		t.Errorf("the burst beside a smaller incident after it: %d sent again, want 40 (%s)", im.Retransmitted.Egress, im.Summary)
	}
}

// TestImpactCountedOnce: what a snapshot or a bucket says is counted by
// one incident where several incidents' stretches hold it. The remote
// sender sends 36 segments again inside the burst, read at the snapshot
// 100 ms after the burst began; a one-drop incident 20 ms after the
// burst, inside that snapshot's interval and the burst's tail, counts
// none of them: its verdict is none, counted by the burst, and info
// (before: "dropped: 36", as the burst's, a warning). A one-drop incident
// 400 ms after the burst, in the burst's tail too, counts what its own
// snapshot shows, 5 segments its socket sent again, and the burst does
// not (before, both did).
func TestImpactCountedOnce(t *testing.T) {
	c := newImpactCase(t)
	mid := c.fromNs + (c.toNs-c.fromNs)/2
	read := c.fromNs + 100*int64(time.Millisecond)
	if c.toNs+30*int64(time.Millisecond) >= read {
		t.Fatalf("the burst lasts %v: the incident after it is not inside the snapshot's interval", time.Duration(c.toNs-c.fromNs))
	}
	late := c.toNs + 400*int64(time.Millisecond)
	lateRead := c.fromNs + (late-c.fromNs+int64(100*time.Millisecond)-1)/int64(100*time.Millisecond)*int64(100*time.Millisecond)
	c.addFlow(replyKey, record.Ingress, func(ns int64) (uint64, uint64, uint32, uint32) {
		if ns >= read {
			return 0, 36, 0, 0
		}
		return 0, 0, 0, 0
	})
	addBucketRetrans(t, c.rec, c.iface, record.Ingress, mid, 36)
	c.addFlow(victimKey, record.Egress, func(ns int64) (uint64, uint64, uint32, uint32) {
		lo, hi := jitter(ns)
		if ns >= lateRead {
			return 5, 5, lo, hi
		}
		return 0, 0, lo, hi
	})
	addBucketRetrans(t, c.rec, c.iface, record.Egress, late+int64(2*time.Millisecond), 5)
	burst := c.finding(t)
	if burst.Incident == nil || burst.Incident.Delta < 2 {
		t.Fatalf("the burst's incident %+v", burst.Incident)
	}
	start := c.rec.Meta.Start.MonoNs
	small := func(fromNs int64) Finding {
		return Finding{Kind: KindMicroburstOut, Interface: c.iface, Severity: SeverityWarning,
			StartOffsetS: float64(fromNs-start) / 1e9, EndOffsetS: float64(fromNs-start+int64(9*time.Millisecond)) / 1e9,
			Incident: &Incident{Delta: 1}}
	}
	fs := []Finding{burst, small(c.toNs + 20*int64(time.Millisecond)), small(late)}
	newAnalysis(c.rec, DefaultOptions()).attachImpacts(fs)
	if im := fs[0].Impact; im.Retransmitted.Ingress != 36 || im.Retransmitted.Egress != 0 {
		t.Errorf("the burst: %+v sent again, want 36 ingress and none of the later incident's (%s)", im.Retransmitted, im.Summary)
	}
	im := fs[1].Impact
	if im.Verdict != ImpactNone || im.CountedByOffsetS == nil || math.Abs(*im.CountedByOffsetS-burst.StartOffsetS) > 1e-6 ||
		im.Retransmitted != (ImpactRetransmitted{}) || fs[1].Severity != SeverityInfo {
		t.Errorf("the incident 20 ms after the burst: %s %+v, counted by %v, severity %s, want none, counted by the burst at %.4f, info (%s)",
			im.Verdict, im.Retransmitted, im.CountedByOffsetS, fs[1].Severity, burst.StartOffsetS, im.Summary)
	}
	if im := fs[2].Impact; im.Verdict != ImpactDropped || im.Retransmitted.Egress != 5 || im.Retransmitted.Ingress != 0 || im.CountedByOffsetS != nil {
		t.Errorf("the incident 400 ms after the burst: %s %+v, want dropped, its own 5 egress (%s)", im.Verdict, im.Retransmitted, im.Summary)
	}
}
