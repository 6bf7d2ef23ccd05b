package report

import (
	"bytes"
	"encoding/json"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/units"
)

// rateToken is a rate as a report writes it: a number, maybe a prefix, a
// rate unit. A number split across a wrapped line is not one.
var rateToken = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)( ?)([kMGT]?)(bit/s|pps|SYN/s|/s)`)

var prefixScale = map[string]float64{"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}

// canonicalRate writes the rate a token says as units writes it.
func canonicalRate(m []string) string {
	v, _ := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	v *= prefixScale[m[3]]
	switch m[4] {
	case "bit/s":
		return units.BitRate(v)
	case "pps":
		return units.PacketRate(v)
	}
	return units.EventRate(v, m[4])
}

// visibleText is an HTML page's text, tags dropped and entities decoded.
func visibleText(page string) string {
	page = regexp.MustCompile(`(?s)<style.*?</style>|<script.*?</script>`).ReplaceAllString(page, " ")
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, "\n"))
}

// TestReportsAgree renders every recording's report in text, HTML and JSON
// and checks each quantity reads the same: every evidence value of the
// JSON appears, written one way, in the text and in the HTML; every rate
// either prints is written as package units writes it (no "145.5 k/s"
// beside "146 k/s", no "40.0 Mbps" beside "Mbit/s").
func TestReportsAgree(t *testing.T) {
	for _, name := range allRecordings(t) {
		t.Run(name, func(t *testing.T) {
			in := loadInput(t, name)
			var text, page, js bytes.Buffer
			if err := Text(&text, in); err != nil {
				t.Fatal(err)
			}
			if err := HTML(&page, in); err != nil {
				t.Fatal(err)
			}
			if err := JSON(&js, in.Result); err != nil {
				t.Fatal(err)
			}
			var res analyzer.Result
			if err := json.Unmarshal(js.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			outputs := map[string]string{"text": text.String(), "html": visibleText(page.String())}
			for _, f := range res.Findings {
				for _, e := range f.Evidence {
					want := evidenceName(e) + " " + fmtEvidence(e)
					for format, out := range outputs {
						if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
							t.Errorf("%s %s: evidence %s = %v %s not written %q", format, f.Kind, e.Name, e.Value, e.Unit, want)
						}
					}
				}
			}
			for format, out := range outputs {
				seen := map[string]bool{}
				for _, m := range rateToken.FindAllStringSubmatch(out, -1) {
					if want := canonicalRate(m); m[0] != want && !seen[m[0]] {
						seen[m[0]] = true
						t.Errorf("%s: rate written %q, units writes it %q", format, m[0], want)
					}
				}
				if bad := regexp.MustCompile(`\d ?[kMG]bps`).FindString(out); bad != "" {
					t.Errorf("%s: %q, not bit/s", format, bad)
				}
			}
		})
	}
}

// TestUnknownLimitsSaySo: a limit without a value says it is unknown, once,
// never "unknown ... (from unknown)".
func TestUnknownLimitsSaySo(t *testing.T) {
	lines := strings.Join(limitLines(analyzer.Limits{}), "\n")
	if strings.Contains(lines, "(from unknown)") || strings.Contains(lines, "burst unknown") ||
		!strings.Contains(lines, "baseline and burst per direction unknown: give --instance-type") {
		t.Errorf("limits, all unknown:\n%s", lines)
	}
	lines = strings.Join(limitLines(analyzer.Limits{BaselineBps: analyzer.Limit{Value: 40e6, Known: true, Source: "lab"}}), "\n")
	if !strings.Contains(lines, "baseline 40 Mbit/s per direction (from lab)") || !strings.Contains(lines, "burst per direction unknown") {
		t.Errorf("limits, burst unknown:\n%s", lines)
	}
}

// TestWrapKeepsQuantitiesWhole: wrapping never splits a number from its
// unit.
func TestWrapKeepsQuantitiesWhole(t *testing.T) {
	s := "peak 560/s over 100 ms from +1.278 s; 0 at +0.933 s, peaks of 2.44 Gbit/s and 12.6 kpps, 304 kB"
	for width := 8; width < 40; width++ {
		for _, l := range wrap(s, width) {
			f := strings.Fields(l)
			if len(f) > 0 && isUnit(strings.TrimRight(f[0], ",;:.)]")) {
				t.Errorf("width %d: line %q starts with a unit", width, l)
			}
		}
	}
}
