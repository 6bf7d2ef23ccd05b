package lab

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/enaprobe/enaprobe/internal/namedns"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

func rootLinkNames(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	return names
}

// assertEmptyNetns checks, through a handle that keeps it alive, that a
// namespace the lab closed holds no link but lo, no qdisc of ours and no
// nftables table.
func assertEmptyNetns(t *testing.T, name string, h netns.NsHandle) {
	t.Helper()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			t.Errorf("%s: link %s left behind", name, l.Attrs().Name)
		}
	}
	qdiscs, err := nl.QdiscList(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qdiscs {
		if q.Type() == "tbf" || q.Type() == "htb" {
			t.Errorf("%s: %s qdisc left behind", name, q.Type())
		}
	}
	held := &namedns.NS{Name: name, Handle: h}
	out, err := held.Run(nil, "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("%s: nftables ruleset left behind:\n%s", name, s)
	}
}

func TestCloseLeavesNothingBehind(t *testing.T) {
	privtest.RequireRoot(t)
	rootBefore := rootLinkNames(t)
	l, err := Up(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Hold both namespaces open past Close, to look inside them after.
	held := map[string]netns.NsHandle{}
	for _, p := range []string{l.InstanceNetnsPath(), l.VPCNetnsPath()} {
		h, err := netns.GetFromPath(p)
		if err != nil {
			l.Close()
			t.Fatal(err)
		}
		defer h.Close()
		held[p] = h
	}
	if _, err := l.TCPBulk(context.Background(), TCPBulkSpec{Duration: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := l.Counters().Read(); err == nil {
		t.Error("counters read after close succeeded")
	}
	for p, h := range held {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", p, err)
		}
		assertEmptyNetns(t, p, h)
	}
	if after := rootLinkNames(t); strings.Join(after, ",") != strings.Join(rootBefore, ",") {
		t.Errorf("root namespace links changed: %v -> %v", rootBefore, after)
	}
}

func TestPartialUpLeavesNothingBehind(t *testing.T) {
	privtest.RequireRoot(t)
	defer func() { upStepHook = nil }()
	for _, step := range []string{"namespaces", "links", "shaping", "nftables", "services"} {
		var made *Lab
		upStepHook = func(l *Lab, s string) error {
			made = l
			if s == step {
				return errors.New("injected failure")
			}
			return nil
		}
		l, err := Up(context.Background(), Config{})
		if err == nil {
			l.Close()
			t.Fatalf("up with a failure after %s succeeded", step)
		}
		if made == nil || made.inst == nil {
			t.Fatalf("failure after %s: hook never saw the lab", step)
		}
		for _, ns := range []*namedns.NS{made.inst, made.vpc} {
			if _, err := os.Stat(ns.Path()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("failure after %s: %s left behind (%v)", step, ns.Path(), err)
			}
		}
	}
}

func TestConfigRejectsImpossibleLimits(t *testing.T) {
	for name, cfg := range map[string]Config{
		"burst lasting minutes": {OutRate: 1_000_000, OutBurst: 100 << 20},
		"burst under a packet":  {InBurst: 1000},
		"peak under rate":       {OutRate: 40_000_000, OutPeakRate: 20_000_000},
		"too many buckets":      {FlowBuckets: 5000},
		"hop limit 300":         {IMDSHopLimit: 300},
	} {
		if _, err := Up(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "lab config") {
			t.Errorf("%s: got %v, want a config error", name, err)
		}
	}
}
