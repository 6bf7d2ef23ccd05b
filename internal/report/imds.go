package report

import (
	"fmt"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
)

// imdsClientText names an imds_hop_limit finding's client and how it was
// found.
func imdsClientText(d *analyzer.IMDSDiagnosis) string {
	s := d.Client
	if o := d.Owner; o != nil {
		var parts []string
		for _, kv := range [][2]string{{"cgroup", o.Cgroup}, {"unit", o.Unit}, {"container", o.Container}, {"pod", o.Pod}, {"comm", o.Comm}} {
			if kv[1] != "" && !strings.Contains(s, kv[1]) {
				parts = append(parts, kv[0]+" "+kv[1])
			}
		}
		if o.PID != 0 {
			parts = append(parts, fmt.Sprintf("pid %d", o.PID))
		}
		if o.How != "" {
			parts = append(parts, "found by "+o.How)
		}
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, ", ") + ")"
		}
	} else {
		s += " (source address of its requests; no owner was found)"
	}
	return s
}

// imdsRequestTexts are the client's requests, one line each: when, what,
// on which connection, and what came back.
func imdsRequestTexts(d *analyzer.IMDSDiagnosis) []string {
	out := make([]string, 0, len(d.Requests)+1)
	for _, r := range d.Requests {
		fate := "no reply seen"
		if r.ReplyTTL > 0 {
			fate = fmt.Sprintf("reply TTL %d", r.ReplyTTL)
		}
		if r.TimeExceeded {
			fate += ", time exceeded sent toward IMDS"
		}
		if r.WaitedS > 0 {
			fate += ", waited " + fmtSeconds(r.WaitedS)
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", fmtOffset(r.OffsetS), r.Kind, r.Flow, fate))
	}
	if n := d.RequestsTotal - len(d.Requests); n > 0 {
		out = append(out, fmt.Sprintf("(%d more)", n))
	}
	return out
}
