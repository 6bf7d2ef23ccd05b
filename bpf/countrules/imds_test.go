package countrules

import (
	"net/netip"
	"testing"

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
