//go:build linux

package loader

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

// seqFrame is a TCP segment of flow sport -> 443 with the given flags,
// sequence number and payload bytes, over IPv4 or IPv6 (by src).
func seqFrame(tb testing.TB, src, dst net.IP, sport uint16, syn, ack bool, seq uint32, payload int) []byte {
	tb.Helper()
	tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 443, SYN: syn, ACK: ack, Seq: seq, Ack: 1, Window: 502}
	if src.To4() != nil {
		ip := frames.IPv4(src, dst, layers.IPProtocolTCP)
		_ = tc.SetNetworkLayerForChecksum(ip)
		return frames.Serialize(tb, frames.Eth(layers.EthernetTypeIPv4), ip, tc, gopacket.Payload(make([]byte, payload)))
	}
	ip := frames.IPv6(src, dst, layers.IPProtocolTCP)
	_ = tc.SetNetworkLayerForChecksum(ip)
	return frames.Serialize(tb, frames.Eth(layers.EthernetTypeIPv6), ip, tc, gopacket.Payload(make([]byte, payload)))
}

// TestDatapathRetransmissions runs a TCP flow's segments through both
// programs, in both bucket modes and both address families: a segment whose
// range ends at or before the highest end seen counts once per wire segment
// it stands for, in the flow and in the time bucket of its direction, also
// across the sequence space's wrap; new data, a SYN, a pure ACK padded to
// Ethernet's minimum (whose padding is no payload) and a partly new segment
// do not count; one sent again up to the highest end is also a tail
// probe. BPF_PROG_TEST_RUN's socket is no TCP socket, so egress
// reads no socket state: the real socket is the lab's (TestImpact in
// internal/lab/catalog).
func TestDatapathRetransmissions(t *testing.T) {
	for _, mode := range bucketModes(t) {
		for _, fam := range []struct {
			name     string
			src, dst net.IP
		}{{"ipv4", v4A, v4B}, {"ipv6", v6A, v6B}} {
			for _, dir := range []record.Direction{record.Ingress, record.Egress} {
				t.Run(mode.String()+"/"+fam.name+"/"+dir.String(), func(t *testing.T) {
					opts := testOptions()
					opts.Buckets = mode
					tp := newTestProbe(t, opts)
					const sport = 40001
					base := uint32(0xffffff00) // wraps after the second segment
					steps := []struct {
						frame []byte
						segs  uint32 // GSO segments, 0 for a plain frame
						want  uint64 // retransmissions counted so far
					}{
						{seqFrame(t, fam.src, fam.dst, sport, true, false, base-1, 0), 0, 0},
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base, 200), 0, 0},
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+200, 200), 0, 0}, // crosses the wrap
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+400, 0), 0, 0},   // pure ACK, padded
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+400, 4), 0, 0},   // 4 new bytes, padded too
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+200, 200), 0, 1}, // sent again
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base, 400), 2, 3},     // again, as 2 segments
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+300, 200), 0, 3}, // partly new
						{seqFrame(t, fam.src, fam.dst, sport, false, true, base+400, 100), 0, 4}, // below the new end
					}
					if n := len(steps[3].frame); fam.name == "ipv4" && n != 60 {
						t.Fatalf("pure ACK frame of %d bytes, want 60 (padded)", n)
					}
					key := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(addrOf(fam.src), sport), Dst: netip.AddrPortFrom(addrOf(fam.dst), 443)}
					for i, s := range steps {
						gsoSize := uint32(0)
						if s.segs > 0 {
							gsoSize = 200
						}
						if err := tp.tryRun(dir, s.frame, s.segs, gsoSize); err != nil {
							t.Fatal(err)
						}
						v, ok := tp.flow(t, key)
						if !ok {
							t.Fatalf("step %d: flow %s not in the table", i, key)
						}
						if uint64(v.SeqRetrans) != s.want {
							t.Errorf("step %d: flow retransmissions %d, want %d", i, v.SeqRetrans, s.want)
						}
					}
					c := tp.read(t)
					if got := c.bucket[dir].Retrans; got != 4 {
						t.Errorf("%s buckets: %d retransmissions, want 4", dir, got)
					}
					if got := c.bucket[1-dir].Retrans; got != 0 {
						t.Errorf("%s buckets: %d retransmissions, want 0", 1-dir, got)
					}
					v, _ := tp.flow(t, key)
					if v.SeqTail != 1 {
						t.Errorf("%d tail probes, want 1 (the last segment, ending at the highest end)", v.SeqTail)
					}
					if v.SkRetrans != 0 || v.SrttMaxUs != 0 || v.ImpactFlags&2 != 0 {
						t.Errorf("socket state read without a TCP socket: retrans %d srtt max %d flags %#x", v.SkRetrans, v.SrttMaxUs, v.ImpactFlags)
					}
				})
			}
		}
	}
}

func addrOf(ip net.IP) netip.Addr {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4))
	}
	return netip.AddrFrom16([16]byte(ip.To16()))
}

// generationProbe is a test probe, the key of TCP flow sport -> 443 of
// v4A and v4B, and the snapshot generation's variable.
func generationProbe(t *testing.T, sport uint16) (*testProbe, record.FlowKey, *ebpf.Variable) {
	t.Helper()
	tp := newTestProbe(t, testOptions())
	key := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(addrOf(v4A), sport), Dst: netip.AddrPortFrom(addrOf(v4B), 443)}
	gen := tp.coll.Variables["flow_snapshot_gen"]
	if gen == nil {
		t.Fatal("no flow_snapshot_gen in the object")
	}
	return tp, key, gen
}

// TestDatapathSilence: a TCP flow's longest silence, per direction, since
// the flow tables' last read: each packet's time since the flow's packet
// before it, the largest kept; a new snapshot generation starts it again
// at its first packet, whose silence spans the read; a flow's first packet
// has none, and UDP none at all. The program's clock is CLOCK_MONOTONIC,
// so each silence lies within the times taken around the test runs.
func TestDatapathSilence(t *testing.T) {
	for _, dir := range []record.Direction{record.Ingress, record.Egress} {
		t.Run(dir.String(), func(t *testing.T) {
			const sport = 40002
			tp, key, gen := generationProbe(t, sport)
			var before, after []int64 // around each run
			run := func(seq uint32) bpf.ProbeFlowStats {
				t.Helper()
				before = append(before, monoclock.Now())
				if err := tp.tryRun(dir, seqFrame(t, v4A, v4B, sport, false, true, seq, 100), 0, 0); err != nil {
					t.Fatal(err)
				}
				after = append(after, monoclock.Now())
				v, ok := tp.flow(t, key)
				if !ok {
					t.Fatalf("flow %s not in the table", key)
				}
				return v
			}
			// waitFor lets at least d pass since the last run, on the
			// clock the program reads.
			waitFor := func(d time.Duration) {
				deadline := after[len(after)-1] + int64(d)
				for monoclock.Now() < deadline {
					runtime.Gosched()
				}
			}
			// within: got is the longest of the silences between the
			// runs after first and up to last; each lies within the
			// stamps around its two runs, so the longest within the
			// longest of their lower and of their upper bounds.
			within := func(step int, got uint32, first, last int) {
				t.Helper()
				var lo, hi int64
				for k := first + 1; k <= last; k++ {
					lo, hi = max(lo, before[k]-after[k-1]), max(hi, after[k]-before[k-1])
				}
				if int64(got) < lo || int64(got) > hi {
					t.Errorf("step %d: longest silence %d ns, want between %d and %d", step, got, lo, hi)
				}
			}
			if v := run(1000); v.GapMaxNs != 0 {
				t.Errorf("first packet: silence %d ns, want none", v.GapMaxNs)
			}
			waitFor(20 * time.Millisecond)
			within(1, run(1100).GapMaxNs, 0, 1)
			// A shorter one keeps the longest. (Usually shorter: a test
			// descheduled between the two runs, as beside a CPU-bound
			// process, makes it the longest, 4.5 ms in a CI run.)
			v := run(1200)
			within(2, v.GapMaxNs, 0, 2)
			// The tables read: the next packet's silence alone, though
			// shorter than the last generation's longest.
			if err := gen.Set(uint32(1)); err != nil {
				t.Fatal(err)
			}
			waitFor(time.Millisecond)
			v = run(1300)
			within(3, v.GapMaxNs, 2, 3)
			if v.SnapGen != 1 {
				t.Errorf("generation %d, want 1", v.SnapGen)
			}
			// Had it kept generation 0's longest (20 ms), step 3 could
			// not hold: the silence it checks is 1 ms and what a busy
			// host adds (up to 5 ms beside a CPU-bound process), far
			// shorter. A stall past 20 ms leaves the two overlapping.
			if gen0 := max(before[1]-after[0], before[2]-after[1]); after[3]-before[2] >= gen0 {
				t.Logf("generation 1's first silence (up to %d ns) overlaps generation 0's longest (at least %d ns): a stall; step 3 does not tell them apart", after[3]-before[2], gen0)
			}
			// UDP: no impact fields at all.
			uip, u := frames.IPv4(v4A, v4B, layers.IPProtocolUDP), &layers.UDP{SrcPort: sport, DstPort: 53}
			_ = u.SetNetworkLayerForChecksum(uip)
			udp := frames.Serialize(t, frames.Eth(layers.EthernetTypeIPv4), uip, u, gopacket.Payload(make([]byte, 40)))
			for range 2 {
				if err := tp.tryRun(dir, udp, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			uk := record.FlowKey{Proto: 17, Src: key.Src, Dst: netip.AddrPortFrom(addrOf(v4B), 53)}
			if u, ok := tp.flow(t, uk); !ok || u.GapMaxNs != 0 {
				t.Errorf("udp flow: %+v (found %v), want no silence", u, ok)
			}
		})
	}
}

// tsFrame is an ACK of flow sport -> 443 with payload bytes whose options
// are lead, then the timestamps option (tsval, tsecr): lead NOP, NOP is
// Linux's layout.
func tsFrame(tb testing.TB, sport uint16, lead []layers.TCPOption, tsval, tsecr uint32, payload int) []byte {
	tb.Helper()
	ts := make([]byte, 8)
	binary.BigEndian.PutUint32(ts, tsval)
	binary.BigEndian.PutUint32(ts[4:], tsecr)
	opts := append(slices.Clone(lead), layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: ts})
	tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 443, ACK: true, Seq: 1000, Ack: 1, Window: 502, Options: opts}
	ip := frames.IPv4(v4A, v4B, layers.IPProtocolTCP)
	_ = tc.SetNetworkLayerForChecksum(ip)
	return frames.Serialize(tb, frames.Eth(layers.EthernetTypeIPv4), ip, tc, gopacket.Payload(make([]byte, payload)))
}

// linuxTS is the options before the timestamps in Linux's segments.
var linuxTS = []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop}}

// TestDatapathEchoAge: the ages of the timestamps a flow's ACKs echo,
// per direction, since the flow tables' last read: the program's clock in
// ms (countrules.MsOf of CLOCK_MONOTONIC) less the echo, the least and the
// greatest kept as signed distances (an echo ahead of the clock, as a
// sender's random offset makes it, is a negative age, below a positive
// one); a new generation starts them again; other option layouts, and a
// timestamp without ACK, are not read.
func TestDatapathEchoAge(t *testing.T) {
	for _, dir := range []record.Direction{record.Ingress, record.Egress} {
		t.Run(dir.String(), func(t *testing.T) {
			const sport = 40003
			tp, key, gen := generationProbe(t, sport)
			echoGen := uint8(bpf.ProbeImpactFlagIMPACT_ECHO_GEN)
			// run sends a frame echoing the clock less age ms, and returns
			// the entry and the ages the clock allows for it.
			run := func(frame func(tsecr uint32) []byte, age int32) (bpf.ProbeFlowStats, uint32, uint32) {
				t.Helper()
				now := countrules.MsOf(uint64(monoclock.Now()))
				tsecr := now - uint32(age)
				lo := countrules.MsOf(uint64(monoclock.Now())) - tsecr
				if err := tp.tryRun(dir, frame(tsecr), 0, 0); err != nil {
					t.Fatal(err)
				}
				hi := countrules.MsOf(uint64(monoclock.Now())) - tsecr
				v, ok := tp.flow(t, key)
				if !ok {
					t.Fatalf("flow %s not in the table", key)
				}
				return v, lo, hi
			}
			linux := func(tsecr uint32) []byte { return tsFrame(t, sport, linuxTS, 7, tsecr, 100) }
			in := func(step string, got, lo, hi uint32) {
				t.Helper()
				if record.EchoRiseMs(lo, got) < 0 || record.EchoRiseMs(got, hi) < 0 {
					t.Errorf("%s: age %d, want in [%d, %d]", step, int32(got), int32(lo), int32(hi))
				}
			}
			// Ahead of the clock by 5 s: a negative age, least and
			// greatest.
			v, lo, hi := run(linux, -5000)
			if v.ImpactFlags&echoGen == 0 {
				t.Fatalf("no echo ages after a Linux ACK: %+v", v)
			}
			in("first", v.EchoAgeMinMs, lo, hi)
			in("first", v.EchoAgeMaxMs, lo, hi)
			// 300 ms: the greatest now, the least kept across the sign.
			least := v.EchoAgeMinMs
			v, lo, hi = run(linux, 300)
			in("older", v.EchoAgeMaxMs, lo, hi)
			if v.EchoAgeMinMs != least {
				t.Errorf("older: least age %d, want %d kept", int32(v.EchoAgeMinMs), int32(least))
			}
			// In between: neither moves.
			greatest := v.EchoAgeMaxMs
			if v, _, _ = run(linux, 10); v.EchoAgeMinMs != least || v.EchoAgeMaxMs != greatest {
				t.Errorf("between: ages %d-%d, want %d-%d", int32(v.EchoAgeMinMs), int32(v.EchoAgeMaxMs), int32(least), int32(greatest))
			}
			// A timestamp behind a SACK-permitted option, or without ACK:
			// not read (the ages stay).
			sackFirst := func(tsecr uint32) []byte {
				return tsFrame(t, sport, []layers.TCPOption{{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2}}, 7, tsecr, 100)
			}
			if v, _, _ = run(sackFirst, 9000); v.EchoAgeMaxMs != greatest {
				t.Errorf("another layout read: greatest age %d, want %d", int32(v.EchoAgeMaxMs), int32(greatest))
			}
			// A new generation: the next ACK's age alone, though younger
			// than the last generation's greatest.
			if err := gen.Set(uint32(1)); err != nil {
				t.Fatal(err)
			}
			noTS := func(uint32) []byte { return seqFrame(t, v4A, v4B, sport, false, true, 2000, 100) }
			if v, _, _ = run(noTS, 0); v.SnapGen != 1 || v.ImpactFlags&echoGen != 0 {
				t.Errorf("new generation, no timestamp: generation %d, echo ages kept %v", v.SnapGen, v.ImpactFlags&echoGen != 0)
			}
			v, lo, hi = run(linux, 40)
			in("new generation", v.EchoAgeMinMs, lo, hi)
			in("new generation", v.EchoAgeMaxMs, lo, hi)
		})
	}
}
