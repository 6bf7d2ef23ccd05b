package analyzer

import (
	"slices"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestAttachNotes: what the trace noted about its place among other tc
// programs (not first, moved back to the head) reaches the report's notes.
func TestAttachNotes(t *testing.T) {
	const note = "eth0: ingress: tcx program cil_from_netdev (id 680) runs before enaprobe (since 0s): packets it drops or redirects are not counted"
	res := Analyze(&record.Recording{Meta: record.Meta{AttachNotes: []string{note}}}, Options{})
	if !slices.Contains(res.Trace.Notes, note) {
		t.Errorf("notes %q, want the attach note", res.Trace.Notes)
	}
}
