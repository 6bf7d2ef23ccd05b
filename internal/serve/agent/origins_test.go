//go:build linux

package agent

import (
	"net/netip"
	"testing"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
)

func testKey(port uint16) record.FlowKey {
	return record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port),
		Dst: netip.MustParseAddrPort("10.0.0.2:443")}
}

func testOrigin(port uint16) loader.FlowOrigin {
	return loader.FlowOrigin{Interface: "eth0", Key: testKey(port), Kind: bpf.ProbeOriginORIGIN_SOCKET, Cookie: uint64(port)}
}

// TestOriginsFollowTheRing: an origin stays while the ring holds its
// flow's last snapshot, goes after; only the recording's flows' origins
// are handed on; over the bound, origins are dropped and counted.
func TestOriginsFollowTheRing(t *testing.T) {
	o := newOrigins(2)
	o.add(100, "eth0", []loader.FlowOrigin{testOrigin(1), testOrigin(2)}, nil)
	// Flow 1 moves on at 500; flow 2 does not.
	o.add(500, "eth0", nil, []record.FlowSnapshot{{TimeNs: 500, Interface: "eth0", Key: testKey(1)}})
	// Over the bound: dropped and counted, the kept ones untouched.
	o.add(600, "eth0", []loader.FlowOrigin{testOrigin(3)}, nil)
	if o.dropped != 1 || len(o.m) != 2 {
		t.Fatalf("after a third origin over a bound of 2: %d kept, %d dropped; want 2 and 1", len(o.m), o.dropped)
	}
	rec := &record.Recording{Flows: []record.FlowSnapshot{
		{TimeNs: 500, Interface: "eth0", Key: testKey(1)}, {TimeNs: 550, Interface: "eth0", Key: testKey(1)},
		{TimeNs: 600, Interface: "eth1", Key: testKey(2)}, // another interface's flow of the same key
	}}
	if got := o.of(rec); len(got) != 1 || got[0].Cookie != 1 {
		t.Errorf("origins of the recording's flows: %+v, want flow 1's once", got)
	}
	// The ring's oldest chunk is now at 300: flow 2 (last seen at 100) is
	// gone from it, flow 1 (500) is not.
	o.expire(300)
	if _, ok := o.m[originKey{"eth0", testKey(2)}]; ok || len(o.m) != 1 {
		t.Errorf("after the ring moved past flow 2: %v, want flow 1 only", o.m)
	}
	o.expire(0) // an empty ring forgets nothing
	if len(o.m) != 1 {
		t.Errorf("an empty ring's expiry forgot origins: %v", o.m)
	}
	// Room again: a new origin is kept.
	o.add(700, "eth0", []loader.FlowOrigin{testOrigin(3)}, nil)
	if len(o.m) != 2 || o.dropped != 1 {
		t.Errorf("after expiry made room: %d kept, %d dropped; want 2 and 1", len(o.m), o.dropped)
	}
	if b := originBound(64 << 20); b < 10000 || int64(b)*originBytes > 64<<20/4 {
		t.Errorf("bound %d origins of %d bytes beside a 64 MiB ring, want a quarter of it", b, originBytes)
	}
}
