//go:build linux

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab"
)

// TestServeOwners: a bundle serve writes names the owner of its flows as
// a trace's report does: the lab's burst is sent from a socket of this
// test process, so the micro-burst finding and the burst's flow name it by
// socket, in the bundle's report and in analyze's reading of the bundle.
func TestServeOwners(t *testing.T) {
	s := startServedLab(t, "--history", "5s", "--after", "1s", "--min-gap", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 300 kB in one go: over the bandwidth allowance's credit.
	burst, err := s.l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "an incident bundle", func() bool { return len(bundles(t, s.dir)) > 0 })
	bundle := bundles(t, s.dir)[0]
	s.stop(t)

	again := analyzeBundle(t, bundle)
	pid := uint32(os.Getpid())
	for name, res := range map[string]analyzer.Result{"the bundle's report": bundleReport(t, bundle), "analyze of the bundle": again} {
		var found bool
		for _, f := range res.Findings {
			for _, fl := range f.Flows {
				if fl.Src != burst.Src.String() {
					continue
				}
				found = true
				if fl.Owner == nil || fl.Owner.PID != pid || fl.Owner.How != "socket" {
					t.Errorf("%s: %s's burst flow %s owner %+v, want this test's process %d by socket", name, f.Kind, fl.Src, fl.Owner, pid)
					continue
				}
				if len(f.Owners) == 0 || f.Owners[0].Owner.PID != pid {
					t.Errorf("%s: %s owners %+v, want this test's process %d first", name, f.Kind, f.Owners, pid)
				}
				t.Logf("%s: %s flow %s -> %s owned by %s; finding's owners %d", name, f.Kind, fl.Src, fl.Dst, fl.Owner, len(f.Owners))
			}
		}
		if !found {
			t.Errorf("%s: no finding names the burst's flow from %s: %+v", name, burst.Src, res.Findings)
		}
		var top bool
		for _, fp := range res.Profile.TopFlows {
			if fp.Src == burst.Src.String() {
				top = fp.Owner != nil && fp.Owner.PID == pid
			}
		}
		if !top {
			t.Errorf("%s: the burst's flow in the top flows has no owner naming process %d: %+v", name, pid, res.Profile.TopFlows)
		}
	}
}
