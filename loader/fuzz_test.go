//go:build linux

package loader

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/internal/frames"
	"github.com/enaprobe/enaprobe/record"
)

// FuzzDatapath feeds the same arbitrary frame and GSO metadata to the eBPF
// program and to the Go reference, and fails on any difference in what they
// count. Its corpus lives in testdata/fuzz/FuzzDatapath.
//
//	go test -run '^$' -fuzz FuzzDatapath -fuzztime 60s ./loader
func FuzzDatapath(f *testing.F) {
	frag4a, frag4b := ipv4Fragments(f)
	frag6a, frag6b := ipv6Fragments(f)
	for _, frame := range [][]byte{
		udpFrame(f, v4A, v4B, 1000, 2000, 18), tcpFrame(f, v4A, v4B, 40000, 443, true, false, 0),
		tcpFrame(f, v6A, v6B, 40000, 443, false, true, 200), ipv4OptionsFrame(f), frag4a, frag4b, frag6a, frag6b,
		ipv6ExtFrame(f), vlanFrame(f, layers.EthernetTypeQinQ, layers.EthernetTypeDot1Q), icmpFrame(f), icmpv6Frame(f),
		arpFrame(f), greFrame(f),
	} {
		f.Add(frame, false, uint16(0), uint16(0))
		f.Add(frame, true, uint16(3), uint16(100))
	}
	for _, c := range frames.IMDS(f) {
		f.Add(c.Frame, c.Dir == record.Ingress, uint16(0), uint16(0))
	}
	vpc := netip.MustParseAddr("10.1.0.2")
	opts := testOptions()
	opts.VPCResolver = vpc
	tp := newTestProbe(f, opts)
	f.Fuzz(func(t *testing.T, frame []byte, ingress bool, gsoSegs, gsoSize uint16) {
		if len(frame) > 3000 {
			return // the test run takes at most a page
		}
		dir := record.Egress
		if ingress {
			dir = record.Ingress
		}
		checkFrame(t, tp, dir, frame, uint32(gsoSegs), uint32(gsoSize), vpc)
	})
}
