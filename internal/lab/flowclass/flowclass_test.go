package flowclass

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// udpFrame builds an Ethernet+IPv4+UDP frame with the given source port, so
// that the flow dissector hashes a distinct 5-tuple per port.
func udpFrame(srcPort uint16) []byte {
	f := make([]byte, 14+20+8+16)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+16))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], []byte{198, 18, 0, 10})
	copy(ip[16:], []byte{198, 18, 1, 10})
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], srcPort)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 8+16)
	return f
}

func TestClassidsStayInRangeAndSpread(t *testing.T) {
	privtest.RequireRoot(t)
	const major, first, buckets = 0x10, 0x100, 8
	prog, err := Load(major, first, buckets)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	seen := map[uint32]bool{}
	for port := uint16(40000); port < 40064; port++ {
		ret, err := prog.Run(&ebpf.RunOptions{Data: udpFrame(port)})
		if err != nil {
			t.Fatal(err)
		}
		if ret>>16 != major || ret&0xffff < first || ret&0xffff >= first+buckets {
			t.Fatalf("port %d: classid %#x outside %x:%x..%x", port, ret, major, first, first+buckets-1)
		}
		again, err := prog.Run(&ebpf.RunOptions{Data: udpFrame(port)})
		if err != nil {
			t.Fatal(err)
		}
		if again != ret {
			t.Fatalf("port %d: classid %#x then %#x: a flow must keep its class", port, ret, again)
		}
		seen[ret] = true
	}
	if len(seen) < buckets/2 {
		t.Fatalf("64 flows used only %d of %d classes", len(seen), buckets)
	}
}

func TestLoadRejectsClassidOverflow(t *testing.T) {
	if _, err := Load(0x10, 0xfff0, 64); err == nil {
		t.Fatal("want an error for buckets past minor 0xffff")
	}
	if _, err := Load(0x10, 0x100, 0); err == nil {
		t.Fatal("want an error for zero buckets")
	}
}
