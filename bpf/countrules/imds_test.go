package countrules

import (
	"net"
	"net/netip"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

func TestIMDS(t *testing.T) {
	for _, c := range frames.IMDS(t) {
		got, ok := IMDS(c.Frame, c.Dir, netip.Addr{})
		want := IMDSEvent{Kind: c.Kind, Key: c.Key, TTL: c.TTL}
		if ok != (c.Kind != 0) || got != want {
			t.Errorf("%s: got %+v %v, want %+v", c.Name, got, ok, want)
		}
	}
}

// TestLinkLocalPayload holds the reference to the cases' own statement of
// what is copied.
func TestLinkLocalPayload(t *testing.T) {
	vpc := net.IPv4(10, 1, 0, 2).To4()
	for _, c := range frames.LinkLocal(t, vpc) {
		ev, ok := LinkLocalPayload(c.Frame, c.Dir, netip.AddrFrom4([4]byte(vpc)))
		if ok != (c.Service != record.ServiceNone) || ev.Service != c.Service || len(ev.Data) != c.Bytes {
			t.Errorf("%s: got %v service %s, %d bytes; want service %s, %d bytes", c.Name, ok, ev.Service, len(ev.Data), c.Service, c.Bytes)
		}
	}
}
