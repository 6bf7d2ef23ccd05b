package debian

import (
	"maps"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	out := `libc6:arm64:
  Installed: (none)
  Candidate: 2.36-9+deb12u13
  Version table:
     2.36-9+deb12u13 500
        500 http://deb.debian.org/debian bookworm/main arm64 Packages
zlib1g:
  Installed: (none)
  Candidate: 1:1.2.13.dfsg-1
  Version table:
linux-image-6.1.0-57-cloud-amd64-unsigned:
  Installed: (none)
  Candidate: (none)
`
	got := parsePolicy(out, "arm64")
	want := map[string]string{"libc6": "2.36-9+deb12u13", "zlib1g": "1:1.2.13.dfsg-1"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/net/veth.ko":           "veth",
		"kernel/net/sched/sch_ingress.ko.xz":   "sch_ingress",
		"kernel/net/sched/cls_bpf.ko.zst":      "cls_bpf",
		"kernel/net/ipv4/udp-tunnel.ko":        "udp_tunnel",
		"kernel/crypto/crc32c_generic.ko.gz":   "crc32c_generic",
		"kernel/drivers/net/veth.ko.something": "veth",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}
