//go:build linux

package loader

import (
	"testing"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/frames"
)

// TestTakeForgets: Take hands over what was gathered since the last Take
// (each flow's origin once, after StreamOrigins) and keeps totals
// cumulative; Health reports the flow table's fill; flows
// still in the table are never pruned.
func TestTakeForgets(t *testing.T) {
	opts := testOptions()
	opts.FlowEntries = 1024
	f := newFlowTableProbe(t, opts)
	f.col.StreamOrigins()
	var tokenRequest []byte // its own flow, and an IMDS event
	for _, c := range frames.IMDS(t) {
		if c.Dir == record.Egress && c.Kind == record.IMDSTokenRequest {
			tokenRequest = c.Frame
			break
		}
	}
	frames, _ := flowFrames(t, 10)
	for _, fr := range frames {
		f.send(t, fr, 2)
	}
	f.send(t, tokenRequest, 1)
	now := monoclock.Now()
	if err := f.col.Drain(now, false); err != nil {
		t.Fatal(err)
	}
	if err := f.col.SnapshotFlows(now); err != nil {
		t.Fatal(err)
	}
	first := f.col.Take()
	if len(first.IMDS) != 1 {
		t.Errorf("first Take: %d IMDS events, want the token request", len(first.IMDS))
	}
	if len(first.LinkLocalPayloads) != 1 || first.LinkLocalPayloads[0].IMDSKind != record.IMDSTokenRequest ||
		string(first.LinkLocalPayloads[0].Data) != "PUT /latest/api/token HTTP/1.1" {
		t.Errorf("first Take: link-local payloads %+v, want the token request's line alone (no headers: no token)", first.LinkLocalPayloads)
	}
	if len(first.Flows) != 11 {
		t.Errorf("first Take: %d flow snapshots, want 11", len(first.Flows))
	}
	// Each egress flow's origin once, when first noted.
	if len(first.Origins) != 11 || first.Origins[0].Kind != bpf.ProbeOriginORIGIN_SOCKET {
		t.Errorf("first Take: origins %+v, want the 11 flows' sockets", first.Origins)
	}
	if h := f.col.Health(now); h.FlowTableFill <= 0 || h.FlowTableFill > 1 {
		t.Errorf("flow table fill %v with 10 flows", h.FlowTableFill)
	}
	if n := f.col.PruneFlows(now + 1); n != 0 {
		t.Errorf("pruned %d flows still in the table", n)
	}
	if len(f.col.flows) != 11 {
		t.Errorf("%d flows remembered, want 11", len(f.col.flows))
	}
	for _, fr := range frames[:3] {
		f.send(t, fr, 1)
	}
	r := f.finish(t)
	second := f.col.Take()
	if len(second.Flows) != 3 {
		t.Errorf("second Take: %d flow snapshots, want the 3 that moved", len(second.Flows))
	}
	if len(second.IMDS) != 0 {
		t.Errorf("second Take: %d IMDS events, want none (handed on already)", len(second.IMDS))
	}
	if len(second.LinkLocalPayloads) != 0 {
		t.Errorf("second Take: %d link-local payloads, want none (handed on already)", len(second.LinkLocalPayloads))
	}
	if len(second.Origins) != 0 {
		t.Errorf("second Take: %d origins, want none (handed on already)", len(second.Origins))
	}
	if len(r.Flows) != 3 {
		t.Errorf("Result after a Take: %d flow snapshots, want 3", len(r.Flows))
	}
	var packets uint64
	for _, tot := range second.Totals {
		packets += tot.SumPackets()
	}
	if packets != 24 {
		t.Errorf("totals %d packets, want 24 (cumulative)", packets)
	}
	if third := f.col.Take(); len(third.Flows) != 0 {
		t.Errorf("a Take after a Take: %d flow snapshots", len(third.Flows))
	}
}
