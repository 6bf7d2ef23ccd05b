//go:build linux

package catalog_test

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// runImpact runs an impact scenario and returns its burst's finding of
// kind: the one naming the burst's flow first.
func runImpact(t *testing.T, name, kind string) (analyzer.Finding, catalog.Truth, *record.Recording) {
	t.Helper()
	privtest.RequireRoot(t)
	s, ok := catalog.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	out, err := catalog.Run(context.Background(), s, capture.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := analyzer.Analyze(out.Recording, out.Analysis)
	for _, n := range out.Truth.Notes {
		t.Log(n)
	}
	var found *analyzer.Finding
	for i, f := range res.Findings {
		if f.Kind != kind || len(f.Flows) == 0 || f.Flows[0].Src != out.Truth.Culprit.String() {
			continue
		}
		found = &res.Findings[i]
		t.Logf("%s %s [%.3f, %.3f] %s", f.Kind, f.Severity, f.StartOffsetS, f.EndOffsetS, f.Summary)
		t.Logf("  impact %s: %s", f.Impact.Verdict, f.Impact.Summary)
		for _, v := range f.Impact.Victims {
			t.Logf("  victim %+v", v)
		}
		break
	}
	if found == nil {
		t.Fatalf("no %s finding naming the burst %s (%d findings)", kind, out.Truth.Culprit, len(res.Findings))
	}
	return *found, out.Truth, out.Recording
}

// victim finds the impact's victim whose flow is key.
func victim(im *analyzer.Impact, key record.FlowKey) *analyzer.Victim {
	for i := range im.Victims {
		if im.Victims[i].Flow == key.String() {
			return &im.Victims[i]
		}
	}
	return nil
}

// victimTo finds the impact's egress TCP victim toward dst (a forwarded
// flow leaves masqueraded: its source is the instance's).
func victimTo(im *analyzer.Impact, dst netip.AddrPort) *analyzer.Victim {
	for i := range im.Victims {
		if v := &im.Victims[i]; v.Direction == "egress" && strings.HasSuffix(v.Flow, " -> "+dst.String()) && strings.HasPrefix(v.Flow, "tcp ") {
			return v
		}
	}
	return nil
}

// TestImpactDroppedLab: a paced TCP upload from a container beside a UDP
// burst through a shallow queue loses segments; the burst's finding says
// dropped and names the upload with its retransmissions. The wire alone
// sees them (a forwarded flow has no socket on the instance), and over the
// trace they are the kernel's (TcpRetransSegs of the container, within
// 10%): the upload's recovery overshoots again later, incidents of their
// own.
func TestImpactDroppedLab(t *testing.T) {
	f, truth, rec := runImpact(t, "impact-dropped", analyzer.KindMicroburstOut)
	im := f.Impact
	if im.Verdict != analyzer.ImpactDropped {
		t.Fatalf("verdict %s (%s), want dropped", im.Verdict, im.Summary)
	}
	v := victimTo(im, truth.VictimPeer)
	if v == nil {
		t.Fatalf("victim toward %s not named: %+v", truth.VictimPeer, im.Victims)
	}
	if truth.RetransSegs == 0 || v.Retransmitted == 0 {
		t.Fatalf("victim retransmitted %d in the incident, the kernel %d: the burst dropped none of its segments", v.Retransmitted, truth.RetransSegs)
	}
	var total uint64 // the flow's snapshots are cumulative
	for _, s := range rec.Flows {
		if s.Key.String() == v.Flow {
			total = max(total, s.RetransWire)
		}
	}
	if d := math.Abs(float64(total) - float64(truth.RetransSegs)); d > 0.1*float64(truth.RetransSegs) {
		t.Errorf("the trace counted %d retransmissions of the victim, the kernel's TcpRetransSegs rose by %d: more than 10%% apart", total, truth.RetransSegs)
	}
	t.Logf("victim: %d retransmitted in the burst's incident, %d in the trace; the kernel %d", v.Retransmitted, total, truth.RetransSegs)
}

// TestImpactQueuedLab: the same, from a socket of the instance, through a
// deep queue drops nothing; the verdict is queued, naming the upload, its
// srtt risen above its noise. The kernel's srtt is smoothed (an eighth of
// each sample): it rises by a fraction of the peak queueing delay the
// lab's probe measures, logged beside it (docs/findings.md, Impact).
func TestImpactQueuedLab(t *testing.T) {
	f, truth, _ := runImpact(t, "impact-queued", analyzer.KindMicroburstOut)
	im := f.Impact
	if im.Verdict != analyzer.ImpactQueued {
		t.Fatalf("verdict %s (%s), want queued", im.Verdict, im.Summary)
	}
	key := record.FlowKey{Proto: 6, Src: truth.Victim, Dst: truth.VictimPeer}
	v := victim(im, key)
	if v == nil {
		t.Fatalf("victim %s not named: %+v", key, im.Victims)
	}
	rise := (v.SRTTDuringUs - v.SRTTBeforeUs) / 1e6
	if truth.QueueDelay <= 0 || im.SRTT == nil || rise <= im.SRTT.NoiseUs/1e6 {
		t.Fatalf("victim srtt rose by %.1f ms (impact srtt %+v), the probe's queueing delay %v: want both", rise*1e3, im.SRTT, truth.QueueDelay)
	}
	t.Logf("victim srtt rose by %.1f ms; the probe's peak queueing delay %.1f ms", rise*1e3, truth.QueueDelay.Seconds()*1e3)
}
