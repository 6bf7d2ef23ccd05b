package report

import (
	_ "embed"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

//go:embed testdata/layoutcheck.js
var layoutCheck string

// TestHTMLLayoutInChromium lays the reports out in headless Chromium and
// measures them: no chart text over another (the baseline and burst labels
// when the two are equal, finding markers side by side), no text outside
// its chart, no table wider than its box, no sideways scrolling.
func TestHTMLLayoutInChromium(t *testing.T) {
	bin := needChromium(t)
	dir := t.TempDir()
	inputs := map[string]Input{}
	// The recordings whose pages had each problem: crowded counter jumps,
	// resets, close findings, wide flow tables.
	for _, name := range []string{"microburst_out", "counter_reset", "conntrack_exceeded", "linklocal_exceeded"} {
		inputs[name] = loadInput(t, name)
	}
	// The lab's case: baseline equal to burst, drawn on the data's scale.
	in := loadInput(t, "microburst_out")
	opt := analyzer.DefaultOptions()
	peak := 0.0
	for _, r := range in.Result.Profile.Rates {
		for _, p := range r.Peaks {
			peak = max(peak, p.Bps)
		}
	}
	opt.BaselineBps, opt.BurstBps = peak/3, peak/3
	inputs["baseline_is_burst"] = Input{Result: analyzer.Analyze(in.Recording, opt), Recording: in.Recording, Env: in.Env}
	// The lab's micro-burst page: long flows (IPv6, a service) with owners
	// in "Top flows", whose ACTIVE and OWNER columns went off-screen.
	wide := *in.Result
	wide.Profile.TopFlows = slices.Clone(in.Result.Profile.TopFlows)
	for i := range wide.Profile.TopFlows {
		f := &wide.Profile.TopFlows[i]
		f.Src, f.Dst = "[2600:1f18:4a3b:9c00:7d2e:1f4a:8b3c:5d6e]:52344", "[2600:1f18:4a3b:9c01:aa55:1f4a:8b3c:ffff]:9100"
		f.Service, f.Directions = "imds", "both"
		f.Owner = &record.Owner{PID: 412133, Comm: "payments-batch-worker", Pod: "payments-prod/payments-batch-worker-5d78c9869d-x7k2p", How: "veth"}
	}
	inputs["wide_flows"] = Input{Result: &wide, Recording: in.Recording, Env: in.Env}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			page := strings.Replace(string(renderHTML(t, in)), "</body>", "<script>"+layoutCheck+"</script></body>", 1)
			path := filepath.Join(dir, name+".html")
			if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, width := range []string{"1400", "1280", "800"} {
				url := "file://" + path
				if width != "800" { // desktop widths: every table fits its card
					url += "#tables"
				}
				dom := chromium(t, bin, url, "--window-size="+width+",2000", "--dump-dom")
				body := findAll(parseHTML(t, dom), func(n *html.Node) bool { return n.Data == "body" })
				raw := attr(body[0], "data-layout")
				var problems []string
				if err := json.Unmarshal([]byte(raw), &problems); err != nil {
					t.Fatalf("width %s: the layout check did not run: %q", width, raw)
				}
				for _, p := range problems {
					t.Errorf("width %s: %s", width, p)
				}
			}
		})
	}
}

// TestTimeTicksSign: a tick at zero reached from below reads "+0 s", and a
// negative one "-0.5 s", never "+-".
func TestTimeTicksSign(t *testing.T) {
	for _, span := range [][2]float64{{-1e-12, 1}, {-0.0000001, 0.8}, {-1, 3}} {
		for _, tk := range timeTicks(span[0], span[1]) {
			if strings.Contains(tk.label, "+-") || tk.label == "-0 s" || strings.HasPrefix(tk.label, "-0.0 ") {
				t.Errorf("span %v: tick %q", span, tk.label)
			}
		}
	}
	if got := timeTicks(-1, 3)[0].label; got != "-1 s" && got != "-1.0 s" {
		t.Errorf("first tick of -1..3 s: %q", got)
	}
}

// TestWindowLabelsAtTheirFindings: findings come in severity order, not
// time order; each label sits at its own window (an earlier finding never
// joins a later one's label), and only windows side by side share one.
func TestWindowLabelsAtTheirFindings(t *testing.T) {
	windows := []chartSpan{{Label: "#1"}, {Label: "#2"}, {Label: "#3"}, {Label: "#4"}}
	centers := []float64{600, 300, 602, 604} // #2 happened first, the rest together
	labels := clusterLabels(windows, centers)
	if len(labels) != 2 {
		t.Fatalf("labels %+v, want #2 alone and #1, #3, #4 together", labels)
	}
	if labels[0].text != "#2" || math.Abs(labels[0].x-300) > 1 {
		t.Errorf("first label %q at %.1f, want #2 at 300", labels[0].text, labels[0].x)
	}
	if labels[1].text != "#1, #3, #4" || labels[1].x < 590 || labels[1].x > 640 {
		t.Errorf("second label %q at %.1f, want \"#1, #3, #4\" near 600", labels[1].text, labels[1].x)
	}
}
