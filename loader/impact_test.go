//go:build linux

package loader

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

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
