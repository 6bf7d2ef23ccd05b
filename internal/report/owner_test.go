package report

import (
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestFlowTableOwners: a finding whose flows have owners shows them in an
// OWNER column, with the placement said once on the narrow text page, and
// its owners ranked on their own line.
func TestFlowTableOwners(t *testing.T) {
	o := &record.Owner{PID: 4121, Comm: "java", Unit: "payments.service", How: "socket"}
	f := analyzer.Finding{Kind: analyzer.KindMicroburstOut, FlowsRankedBy: "bytes", Flows: []analyzer.FlowShare{
		{Proto: "udp", Src: "10.0.0.1:5000", Dst: "10.0.0.2:9", Bytes: 1000, Packets: 10, Share: 0.9, Source: "window_events", Owner: o},
		{Proto: "udp", Src: "10.0.0.1:5001", Dst: "10.0.0.2:9", Bytes: 100, Packets: 1, Share: 0.1, Source: "window_events"},
	}, Owners: []analyzer.OwnerShare{{Owner: *o, Share: 0.9, Flows: 1, Bytes: 1000, Packets: 10}}}
	tb, placed := flowShareTable(f, true)
	lines := strings.Join(tb.render(""), "\n")
	if placed != "per window" || strings.Contains(lines, "PLACED") || !strings.Contains(lines, "OWNER") ||
		!strings.Contains(lines, "java[4121] payments.service") {
		t.Errorf("narrow table (placed %q):\n%s", placed, lines)
	}
	wide, placed := flowShareTable(f, false)
	if placed != "" || !strings.Contains(strings.Join(wide.rows[0], " "), "PLACED OWNER") {
		t.Errorf("wide table header %v, placed %q", wide.rows[0], placed)
	}
	if got := ownersText(f.Owners); got != "java[4121] payments.service 90.0% (1 flow)" {
		t.Errorf("ownersText = %q", got)
	}
	f.Flows[0].Owner, f.Owners = nil, nil
	if tb, _ := flowShareTable(f, true); strings.Contains(strings.Join(tb.rows[0], " "), "OWNER") {
		t.Errorf("no owners, yet an OWNER column: %v", tb.rows[0])
	}
}
