//go:build linux

package loader

import (
	"net"
	"net/netip"
	"testing"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestDatapathOrigin runs frames with BPF_PROG_TEST_RUN, which gives each
// run a socket of its own: an egress flow notes the socket of its first
// packet (its cookie and cgroup) and keeps it when a later packet comes from
// another socket, an ingress flow notes nothing, and with NoOrigins nothing
// is noted. Forwarded packets (no socket, another ingress interface) need
// real forwarding: the veth test in owner/.
func TestDatapathOrigin(t *testing.T) {
	for _, off := range []bool{false, true} {
		opts := testOptions()
		opts.NoOrigins = off
		tp := newTestProbe(t, opts)
		run := func(dir record.Direction, sport uint16) record.FlowKey {
			t.Helper()
			if err := tp.tryRun(dir, udpFrame(t, v4A, v4B, sport, 53, 40), 0, 0); err != nil {
				t.Fatal(err)
			}
			return record.FlowKey{Proto: 17, Src: netip.AddrPortFrom(addr4(v4A), sport), Dst: netip.AddrPortFrom(addr4(v4B), 53)}
		}
		egress := run(record.Egress, 1001)
		first, _ := tp.flow(t, egress)
		run(record.Egress, 1001) // another socket, same flow
		ingress := run(record.Ingress, 1003)

		v, ok := tp.flow(t, egress)
		if !ok {
			t.Fatalf("flow %s not in the table", egress)
		}
		switch {
		case off && (v.Origin != 0 || v.SockCookie != 0):
			t.Errorf("origins off: egress flow noted origin %d cookie %d", v.Origin, v.SockCookie)
		case !off && bpf.ProbeOrigin(v.Origin) != bpf.ProbeOriginORIGIN_SOCKET:
			t.Errorf("egress flow origin %d, want socket", v.Origin)
		case !off && (v.SockCookie == 0 || v.SockCgroup == 0):
			t.Errorf("egress flow: cookie %d cgroup %d, want both", v.SockCookie, v.SockCgroup)
		case !off && v.SockCookie != first.SockCookie:
			t.Errorf("egress flow: cookie %d after a second socket's packet, want the first's %d", v.SockCookie, first.SockCookie)
		case v.InIfindex != 0:
			t.Errorf("egress flow of a socket: in_ifindex %d", v.InIfindex)
		}
		if v, ok := tp.flow(t, ingress); !ok || v.Origin != 0 || v.SockCookie != 0 {
			t.Errorf("ingress flow: in table %v, origin %d cookie %d; want noted nothing", ok, v.Origin, v.SockCookie)
		}
	}
}

func addr4(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}
