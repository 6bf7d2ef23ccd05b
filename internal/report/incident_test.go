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

// TestRecurrencesShown: an incident that folds several of one flow says
// how many on its line of the text report and in the JSON report, which
// validates; one that does not says nothing of it.
func TestRecurrencesShown(t *testing.T) {
	in := loadInput(t, "microburst_out")
	var inc *analyzer.Incident
	for _, x := range in.Result.Findings {
		if x.Incident != nil {
			inc = x.Incident
			break
		}
	}
	if inc == nil {
		t.Fatal("no incident finding")
	}
	if line := incidentText(inc); strings.Contains(line, "incidents") {
		t.Errorf("one incident's line %q speaks of incidents", line)
	}
	inc.Recurrences = 3
	var text bytes.Buffer
	if err := Text(&text, in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), "(3 incidents of one flow) over") {
		t.Errorf("text report does not say the incident folds 3: %q", incidentText(inc))
	}
	js := validJSON(t, in.Result)
	if !strings.Contains(js, `"recurrences": 3`) {
		t.Error("json report lacks recurrences")
	}
}

// TestBoundedLagShown: a lag the run only bounded reads as its bounds on
// the incident's line, with no middle; one it narrowed down reads as the
// lag and its range.
func TestBoundedLagShown(t *testing.T) {
	inc := &analyzer.Incident{Counter: "bw_out_allowance_exceeded", CounterLagSource: "estimated", CounterRefreshKnown: true,
		CounterLagS: 0.0076, CounterLagHighS: 0.0152, CounterLagBounded: true, LookBackS: 0.02}
	if got := timingText(inc); !strings.Contains(got, "counter lag 0 s to 15.2 ms (estimated, no closer)") || strings.Contains(got, "7.6") {
		t.Errorf("bounded: %q, want its bounds and no middle", got)
	}
	inc.CounterLagS, inc.CounterLagLowS, inc.CounterLagHighS, inc.CounterLagBounded = 0.0204, 0.016, 0.025, false
	if got := timingText(inc); !strings.Contains(got, "counter lag 20.4 ms (16 ms to 25 ms, estimated)") || strings.Contains(got, "no closer") {
		t.Errorf("narrowed down: %q, want the lag and its range", got)
	}
}

// TestSharedJumpShown: a jump whose rise other incidents shared (the
// analyzer's causesApart) shows this incident's share of the whole in its
// bar's title.
func TestSharedJumpShown(t *testing.T) {
	f := analyzer.Finding{StartOffsetS: 1, EndOffsetS: 1.01, Incident: &analyzer.Incident{Counter: "bw_out_allowance_exceeded", Jumps: 2,
		Timeline: []analyzer.CounterJump{{OffsetS: 1.2, Delta: 1120, Of: 2240}, {OffsetS: 2.2, Delta: 300}}}}
	strip := string(jumpStrip(f, 0.9, 2.5))
	if !strings.Contains(strip, "+1,120 of +2,240 at") || !strings.Contains(strip, "+300 at") || strings.Contains(strip, "+300 of") {
		t.Errorf("strip titles %s: want the shared rise as its share of the whole, the other alone", strip)
	}
}
