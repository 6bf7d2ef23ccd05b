package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
)

// TestIncidentShown: an incident's jumps are one line of the text report
// and one bar each in the strip under its HTML zoom chart; a conntrack
// finding shows the gauge's course.
func TestIncidentShown(t *testing.T) {
	for _, name := range []string{"linklocal_exceeded", "conntrack_exceeded"} {
		t.Run(name, func(t *testing.T) {
			in := loadInput(t, name)
			var inc *analyzer.Incident
			var f analyzer.Finding
			for _, x := range in.Result.Findings {
				if x.Incident != nil {
					f, inc = x, x.Incident
					break
				}
			}
			if inc == nil {
				t.Fatal("no incident finding")
			}
			var text bytes.Buffer
			if err := Text(&text, in); err != nil {
				t.Fatal(err)
			}
			line := incidentText(inc)
			if !strings.Contains(line, " jumps over ") || !strings.Contains(strings.Join(strings.Fields(text.String()), " "), line) {
				t.Errorf("text report lacks the incident line %q", line)
			}
			if (len(f.Gauge) > 0) != (f.Kind == analyzer.KindConntrackExceeded) {
				t.Errorf("%s with a gauge course of %d points", f.Kind, len(f.Gauge))
			}
			if len(f.Gauge) > 0 && !strings.Contains(text.String(), "Gauge") {
				t.Error("text report lacks the gauge's course")
			}
			var html bytes.Buffer
			if err := HTML(&html, in); err != nil {
				t.Fatal(err)
			}
			jumps := 0
			for _, x := range in.Result.Findings {
				if x.Incident != nil {
					jumps += x.Incident.Jumps
				}
			}
			if got := strings.Count(html.String(), `<g class="jump">`); got != jumps {
				t.Errorf("the strips have %d bars for %d jumps", got, jumps)
			}
		})
	}
}
