package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite testdata/sample-report.png")

// htmlRecordings are rendered by the HTML tests: every finding kind, a
// non-ENA interface and counter trouble.
var htmlRecordings = []string{"microburst_out", "microburst_in", "non_ena", "linklocal_exceeded", "conntrack_exceeded",
	"baseline_exhausted", "pps", "flow_at_cap", "counter_reset", "steady"}

func renderHTML(t *testing.T, in Input) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := HTML(&buf, in); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parseHTML(t *testing.T, b []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return n.Type == html.ElementNode && strings.Contains(" "+attr(n, "class")+" ", " "+class+" ")
}

// findAll returns the nodes under n that match.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for _, t := range findAll(n, func(n *html.Node) bool { return n.Type == html.TextNode }) {
		b.WriteString(t.Data)
	}
	return b.String()
}

var pathCommand = regexp.MustCompile(`([MHVLhvZ])([^MHVLhvZ]*)`)

// pathExtent is the width and height of the box a data path covers (the
// commands the charts write: M, H, V, L, h, v, Z) and its highest point
// (smallest y).
func pathExtent(d string) (w, h, top float64, err error) {
	var x, y float64
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, m := range pathCommand.FindAllStringSubmatch(d, -1) {
		var nums []float64
		for _, f := range strings.Fields(strings.ReplaceAll(m[2], ",", " ")) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("path %q: %w", d, err)
			}
			nums = append(nums, v)
		}
		switch m[1] {
		case "M", "L":
			if len(nums) != 2 {
				return 0, 0, 0, fmt.Errorf("path %q: %s with %d numbers", d, m[1], len(nums))
			}
			x, y = nums[0], nums[1]
		case "H":
			x = nums[0]
		case "V":
			y = nums[0]
		case "h":
			x += nums[0]
		case "v":
			y += nums[0]
		}
		minX, maxX, minY, maxY = math.Min(minX, x), math.Max(maxX, x), math.Min(minY, y), math.Max(maxY, y)
	}
	return maxX - minX, maxY - minY, minY, nil
}

// checkCharts fails on a chart without data: every <svg class="chart"> must
// hold a data path that spans the plot and rises above its zero line (a
// flat line at 40 pps is data, a flat line at 0 is not).
func checkCharts(t *testing.T, doc *html.Node) int {
	t.Helper()
	charts := findAll(doc, func(n *html.Node) bool { return n.Data == "svg" && hasClass(n, "chart") })
	for i, c := range charts {
		ok := false
		for _, p := range findAll(c, func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "data") }) {
			w, h, top, err := pathExtent(attr(p, "d"))
			if err != nil {
				t.Fatal(err)
			}
			ok = ok || w > 1 && (h > 1 || top < marginTop+plotHeight-0.5)
		}
		if !ok {
			t.Errorf("chart %d (%s) has no data path with a non-trivial d", i, attr(c, "aria-label"))
		}
	}
	return len(charts)
}

// TestHTMLSelfContained checks what can be checked without a browser: no
// external resource, charts with data, every finding and its zoom chart.
func TestHTMLSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(<script[^>]+src=|<link[^>]+href=|<img[^>]+src=|@import|url\(|https?://|//cdn)`)
	for _, name := range htmlRecordings {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := loadInput(t, name)
			page := renderHTML(t, in)
			if m := external.Find(page); m != nil {
				t.Errorf("page refers to something outside it: %q", m)
			}
			doc := parseHTML(t, page)
			if n := checkCharts(t, doc); n < 3 {
				t.Errorf("only %d charts", n)
			}
			for i, f := range rankedFindings(in.Result) {
				art := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == fmt.Sprintf("finding-%d", i+1) })
				if len(art) != 1 {
					t.Fatalf("finding #%d (%s): no article", i+1, f.Kind)
				}
				text := textOf(art[0])
				for _, want := range []string{f.Summary, f.Recommendation} {
					if !strings.Contains(text, want) {
						t.Errorf("finding #%d: %q missing", i+1, want)
					}
				}
				for _, fl := range f.Flows {
					if !strings.Contains(text, flowString(fl.Proto, fl.Src, fl.Dst)) {
						t.Errorf("finding #%d: flow %s -> %s missing", i+1, fl.Src, fl.Dst)
					}
				}
				if zooms := findAll(art[0], func(n *html.Node) bool { return n.Data == "svg" && hasClass(n, "chart") }); len(zooms) != 1 {
					t.Errorf("finding #%d: %d zoom charts", i+1, len(zooms))
				}
			}
		})
	}
}

// TestHTMLWithoutRecording: from a result alone the page has no time
// charts, says why, and still draws the packet sizes.
func TestHTMLWithoutRecording(t *testing.T) {
	in := loadInput(t, "microburst_out")
	in.Recording = nil
	page := renderHTML(t, in)
	if !bytes.Contains(page, []byte("The recording was not available to this report")) {
		t.Error("page does not say the time charts are missing")
	}
	if n := checkCharts(t, parseHTML(t, page)); n != 1 {
		t.Errorf("%d charts without a recording, want the size-mix chart only", n)
	}
}

// TestHTMLKeepsMicroBursts: the whole-trace chart reduces 80,000 buckets to
// fewer columns by max, so the 8 ms burst of microburst_out stays at least
// as high as its 1 ms peak, and the counter jump is marked.
func TestHTMLKeepsMicroBursts(t *testing.T) {
	in := loadInput(t, "microburst_out")
	tl := newTimeline(in.Recording, in.Result)
	w := tl.window(tl.startNs, tl.endNs, tl.bucketNs())
	if w.slots() <= plotWidth {
		t.Fatalf("recording too short to need downsampling: %d slots", w.slots())
	}
	egress := tl.directionSeries("eth0", []record.Direction{record.Egress}, w, metricBits)
	var peak1ms float64
	for _, r := range in.Result.Profile.Rates {
		if r.Direction == "egress" {
			peak1ms = r.Peaks[0].Bps
		}
	}
	c := lineChart{Series: egress}
	if got := c.dataMax(); got < peak1ms {
		t.Errorf("downsampled egress peaks at %s, below the 1 ms peak %s: the burst was averaged away", fmtBps(got), fmtBps(peak1ms))
	}
	page := string(renderHTML(t, in))
	for _, want := range []string{"bw_out +1,075", "each column showing the highest slot it covers (max, not mean)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestColumnsKeepMax(t *testing.T) {
	const width = 100_000
	var buckets []record.Bucket
	for i := range int64(10_000) {
		buckets = append(buckets, record.Bucket{StartNs: i * width, Bytes: 100})
	}
	buckets[5000].Bytes = 1_000_000 // one bucket of 80 Gbit/s
	cols := columns(buckets, 0, 10_000*width, width, 100, metricBits)
	if len(cols) != 100 {
		t.Fatalf("%d columns", len(cols))
	}
	if cols[50] != 8e6*1e9/width {
		t.Errorf("spike column %v, want %v", cols[50], 8e6*1e9/width)
	}
	if cols[0] != 800*1e9/width {
		t.Errorf("flat column %v, want %v", cols[0], 800*1e9/width)
	}
	full := columns(buckets[:50], 0, 50*width, width, 100, metricBits)
	if len(full) != 50 {
		t.Errorf("50 buckets in %d columns, want one each", len(full))
	}
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium runs headless Chromium with args on url and returns stdout.
func chromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

func needChromium(t *testing.T) string {
	bin := findChromium()
	if bin == "" {
		privtest.Unavailable(t, "chromium (apt-get install -y chromium) to check the HTML report")
	}
	return bin
}

// TestHTMLInChromium opens the reports in headless Chromium with #selftest
// (the page's script hovers every chart once) and reads the DOM back: no
// script error, the self test ran over every chart, no empty chart.
func TestHTMLInChromium(t *testing.T) {
	bin := needChromium(t)
	dir := t.TempDir()
	for _, name := range htmlRecordings {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, name+".html")
			if err := os.WriteFile(path, renderHTML(t, loadInput(t, name)), 0o644); err != nil {
				t.Fatal(err)
			}
			dom := chromium(t, bin, "file://"+path+"#selftest", "--dump-dom")
			doc := parseHTML(t, dom)
			errs := findAll(doc, func(n *html.Node) bool { return attr(n, "id") == "script-errors" })
			if len(errs) != 1 {
				t.Fatalf("dumped DOM has %d #script-errors elements (%d bytes of DOM)", len(errs), len(dom))
			}
			if msg := strings.TrimSpace(textOf(errs[0])); msg != "" {
				t.Errorf("script errors in Chromium:\n%s", msg)
			}
			charts := checkCharts(t, doc)
			hoverable := len(findAll(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "data-series") != "" }))
			body := findAll(doc, func(n *html.Node) bool { return n.Data == "body" })
			if got, want := attr(body[0], "data-selftest"), fmt.Sprintf("done %d", hoverable); got != want {
				t.Errorf("self test: %q, want %q (did the script run?)", got, want)
			}
			if charts < 3 || hoverable < 2 {
				t.Errorf("%d charts, %d with hover data", charts, hoverable)
			}
		})
	}
}

// TestHTMLScreenshot renders one report to PNG; with -update-screenshot it
// keeps it as testdata/sample-report.png (shown in docs/findings.md).
func TestHTMLScreenshot(t *testing.T) {
	bin := needChromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, renderHTML(t, loadInput(t, "microburst_out")), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	chromium(t, bin, "file://"+page, "--window-size=1280,2400", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// A page that rendered nothing is one colour; the report has text,
	// badges and two colours of chart.
	colours := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
		}
	}
	if b.Dx() != 1280 || len(colours) < 50 {
		t.Errorf("screenshot %dx%d with %d colours: blank?", b.Dx(), b.Dy(), len(colours))
	}
	if *updateScreenshot {
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/sample-report.png", data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepeatedInfoInShort: info findings of one kind on one interface after
// the first of them are shown in short, in text and HTML alike, each
// pointing at the first, whose evidence and fix stand once.
func TestRepeatedInfoInShort(t *testing.T) {
	in := loadInput(t, "steady")
	res := *in.Result
	mk := func(sev, kind, iface, summary string) analyzer.Finding {
		return analyzer.Finding{Severity: sev, Kind: kind, Interface: iface, Summary: summary,
			Recommendation: "fix for " + summary, Evidence: []analyzer.Evidence{{Name: "evidence_of_" + summary, Value: 1}}}
	}
	res.Findings = []analyzer.Finding{
		mk(analyzer.SeverityWarning, analyzer.KindMicroburstOut, "eth0", "burst one"),
		mk(analyzer.SeverityInfo, analyzer.KindFlowAtCap, "eth0", "plateau one"),
		mk(analyzer.SeverityInfo, analyzer.KindFlowAtCap, "eth0", "plateau two"),
		mk(analyzer.SeverityInfo, analyzer.KindFlowAtCap, "eth0", "plateau three"),
		mk(analyzer.SeverityInfo, analyzer.KindFlowAtCap, "eth1", "plateau other interface"),
	}
	in.Result = &res
	text := renderText(t, in)
	doc := parseHTML(t, renderHTML(t, in))
	for n, c := range []struct {
		summary string
		asFirst int // 0: shown whole
	}{{"burst one", 0}, {"plateau one", 0}, {"plateau two", 2}, {"plateau three", 2}, {"plateau other interface", 0}} {
		art := findAll(doc, func(x *html.Node) bool { return attr(x, "id") == fmt.Sprintf("finding-%d", n+1) })
		if len(art) != 1 {
			t.Fatalf("finding #%d: no article", n+1)
		}
		page := textOf(art[0])
		whole := strings.Contains(page, "fix for "+c.summary)
		short := strings.Contains(page, fmt.Sprintf("Evidence and fix as in #%d", c.asFirst))
		if c.asFirst == 0 && (!whole || strings.Contains(page, "Evidence and fix as in")) {
			t.Errorf("HTML finding #%d (%s) not shown whole: %q", n+1, c.summary, page)
		}
		if c.asFirst > 0 && (whole || !short) {
			t.Errorf("HTML finding #%d (%s) not shown in short as #%d: %q", n+1, c.summary, c.asFirst, page)
		}
		textShort := strings.Contains(text, fmt.Sprintf("(evidence and fix as #%d: %s)", c.asFirst, analyzer.KindFlowAtCap))
		if c.asFirst > 0 && (!textShort || strings.Contains(text, "fix for "+c.summary)) {
			t.Errorf("text finding #%d (%s) not shown in short as #%d", n+1, c.summary, c.asFirst)
		}
		if c.asFirst == 0 && !strings.Contains(text, "fix for "+c.summary) {
			t.Errorf("text finding #%d (%s) not shown whole", n+1, c.summary)
		}
	}
}
