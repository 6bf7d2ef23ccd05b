package report

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

func renderText(t *testing.T, in Input) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Text(&buf, in); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func checkWidth(t *testing.T, text string) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > textWidth {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
	}
}

// sectionOrder checks that the report's sections come in the documented
// order.
var sections = []string{"FINDINGS: ", "PROFILE", "Traffic since attach", "Peaks beside CloudWatch",
	"Top flows by bytes", "Link-local services", "Packet sizes", "Counter read latency", "NIC COUNTERS", "LOSS"}

func TestTextAllRecordings(t *testing.T) {
	for _, name := range allRecordings(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := loadInput(t, name)
			text := renderText(t, in)
			checkWidth(t, text)
			rest := text
			for _, s := range sections {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("section %q missing or out of order", s)
					continue
				}
				rest = rest[i:]
			}
			counters := "counters read every"
			if in.Result.Trace.CounterSource == "none" {
				counters = "no allowance counters read"
			}
			for _, want := range []string{in.Result.Trace.Hostname, in.Result.Trace.InstanceType,
				in.Result.Trace.AttachMode, in.Env.CommandLine, counters} {
				if !strings.Contains(text, want) {
					t.Errorf("header lacks %q", want)
				}
			}
			// Every finding is there with its summary's first words, its
			// flows and its fix, ranked by severity then time.
			var titles []int
			for i, f := range rankedFindings(in.Result) {
				title := findingTitle(i, f)
				at := strings.Index(text, title)
				if at < 0 {
					t.Fatalf("finding %q missing", title)
				}
				titles = append(titles, at)
				for _, fl := range f.Flows {
					if !strings.Contains(text, flowString(fl.Proto, fl.Src, fl.Dst)) {
						t.Errorf("finding %s: flow %s -> %s missing", f.Kind, fl.Src, fl.Dst)
					}
				}
				if words := strings.Fields(f.Recommendation); len(words) > 3 &&
					!strings.Contains(text, strings.Join(words[:3], " ")) {
					t.Errorf("finding %s: recommendation missing", f.Kind)
				}
			}
			if !slices.IsSorted(titles) {
				t.Errorf("findings out of rank order at offsets %v", titles)
			}
			// The dashboard sentence for every interface and direction.
			gap := regexp.MustCompile(`\S+ (ingress|egress): 1 ms peak [0-9.]+ [kMGT]?bit/s vs 1-min average [0-9.]+ [kMGT]?bit/s: [0-9.]+x`)
			oneLine := strings.Join(strings.Fields(text), " ")
			want := 0
			for _, r := range in.Result.Profile.Rates {
				if r.MeanBps > 0 {
					want++
				}
			}
			if got := len(gap.FindAllString(oneLine, -1)); got != want {
				t.Errorf("%d peak-vs-average sentences, want %d", got, want)
			}
		})
	}
}

func TestTextSaysWhatIsMissing(t *testing.T) {
	text := renderText(t, loadInput(t, "non_ena"))
	if !strings.Contains(text, "veth0 (veth): no ENA allowance counters; packet profile only") {
		t.Error("non-ENA interface not named plainly")
	}
	if !strings.Contains(text, "All loss counters are zero") {
		t.Error("loss section does not say plainly that nothing was lost")
	}
	reset := renderText(t, loadInput(t, "counter_reset"))
	if strings.Contains(reset, "All loss counters are zero") {
		t.Error("counter_reset claims no loss")
	}
	for _, want := range []string{"read failed", "admin queue command timed out", "reset  ", "went from 1,200 to 0"} {
		if !strings.Contains(reset, want) {
			t.Errorf("counter_reset loss section lacks %q", want)
		}
	}
	steady := renderText(t, loadInput(t, "steady"))
	if !strings.Contains(steady, "FINDINGS: 0") || !strings.Contains(steady, "Nothing exceeded") {
		t.Error("steady trace does not say there is nothing to find")
	}
}

// TestTextWideFlowsFit renders flows with the longest IPv6 endpoints: the
// tables fall back to a stacked layout instead of overflowing.
func TestTextWideFlowsFit(t *testing.T) {
	in := loadInput(t, "microburst_out_snapshots")
	res := *in.Result
	long := "[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65535"
	res.Findings = slices.Clone(res.Findings)
	for i := range res.Findings {
		f := &res.Findings[i]
		f.Flows = slices.Clone(f.Flows)
		for j := range f.Flows {
			f.Flows[j].Src, f.Flows[j].Dst = long, long
		}
	}
	res.Profile.TopFlows = slices.Clone(res.Profile.TopFlows)
	for i := range res.Profile.TopFlows {
		res.Profile.TopFlows[i].Src, res.Profile.TopFlows[i].Dst = long, long
	}
	in.Result = &res
	text := renderText(t, in)
	checkWidth(t, text)
	if !strings.Contains(strings.Join(strings.Fields(text), " "), flowString("tcp", long, long)) {
		t.Error("long flow not written whole")
	}
}

func TestTextNeedsResult(t *testing.T) {
	if err := Text(&bytes.Buffer{}, Input{}); err == nil {
		t.Error("no error without a result")
	}
}

func TestFormat(t *testing.T) {
	cases := []struct{ got, want string }{
		{fmtBps(9.8e9), "9.8 Gbit/s"},
		{fmtBps(310e6), "310 Mbit/s"},
		{fmtBps(999.96e3), "1 Mbit/s"},
		{fmtBps(0), "0 bit/s"},
		{fmtPPS(1024), "1,024 pps"},
		{fmtPPS(301000), "301 kpps"},
		{fmtPPS(4.00266), "4 pps"},
		{fmtBytes(19242690), "19.2 MB"},
		{fmtCount(uint64(1234567)), "1,234,567"},
		{fmtCount(-1234), "-1,234"},
		{fmtShare(0.98697), "98.7%"},
		{fmtShare(0.0039), "0.39%"},
		{fmtShare(0.00001), "<0.01%"},
		{fmtSeconds(0.999939), "1 s"},
		{fmtSeconds(0.008), "8 ms"},
		{fmtSeconds(0.0001), "100 µs"},
		{fmtSeconds(10.8), "10.8 s"},
		{fmtSeconds(125), "2 min 5 s"},
		{fmtOffset(4.345), "+4.345 s"},
		{fmtRatio(9.8e9, 310e6), "32x"},
		{fmtRatio(1.4, 1), "1.4x"},
		{fmtEvidence(analyzer.Evidence{Value: 1075, Unit: "packets"}), "1,075 packets"},
		{fmtEvidence(analyzer.Evidence{Value: 0.5, Unit: "ratio"}), "50.0%"},
		{fmtEvidence(analyzer.Evidence{Value: 4000, Unit: "per_s"}), "4,000/s"},
		{fmtEvidence(analyzer.Evidence{Value: 2, Unit: "count"}), "2"},
		{evidenceName(analyzer.Evidence{Name: "counter_lag_s", Unit: "s"}), "counter_lag"},
		{sig(0.000123456), "0.000123"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestRenderEmptyResult: a result with nothing in it (a trace that saw no
// interface) still renders, saying so, instead of panicking.
func TestRenderEmptyResult(t *testing.T) {
	in := Input{Result: &analyzer.Result{SchemaVersion: analyzer.SchemaVersion}}
	text := renderText(t, in)
	for _, want := range []string{"FINDINGS: 0", "No totals recorded", "No flows recorded", "No counter was read", "All loss counters are zero"} {
		if !strings.Contains(text, want) {
			t.Errorf("empty report lacks %q", want)
		}
	}
	page := renderHTML(t, in)
	if !bytes.Contains(page, []byte("No flows recorded")) {
		t.Error("empty HTML report does not say there are no flows")
	}
	if err := JSON(&bytes.Buffer{}, in.Result); err != nil {
		t.Error(err)
	}
}

// TestTextSaysWhatTheKernelChanged: a trace on a kernel without tcx and
// without pinned BPF timers says so, in the Capture line and the notes.
func TestTextSaysWhatTheKernelChanged(t *testing.T) {
	in := loadInput(t, "steady")
	rec := *in.Recording
	rec.Meta.AttachMode, rec.Meta.BucketMode = "tc", "shared"
	res := analyzer.Analyze(&rec, analyzer.DefaultOptions())
	env := record.EnvironmentOf(&rec)
	text := renderText(t, Input{Result: res, Recording: &rec, Env: env})
	for _, want := range []string{"tc attach; 100 µs buckets (shared)", "not tcx (Linux 6.6+)", "pinned BPF timers (Linux 6.7+)"} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	rec.Meta.AttachMode, rec.Meta.BucketMode = "tcx", "per-cpu"
	if notes := analyzer.Analyze(&rec, analyzer.DefaultOptions()).Trace.Notes; slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "Linux 6.") }) {
		t.Errorf("tcx and per-cpu buckets noted as a fallback: %q", notes)
	}
}

// TestCaptureLineSaysNoCounters: a trace that read no counter does not claim
// a read interval ("counters read every 10 ms (source: none)").
func TestCaptureLineSaysNoCounters(t *testing.T) {
	tr := analyzer.TraceInfo{BucketUs: 100, FineWindowUs: 1000, SampleMs: 10, CounterSource: "none"}
	if got := captureText("tcx", "", tr); strings.Contains(got, "read every") || !strings.Contains(got, "no allowance counters read") {
		t.Errorf("capture line %q", got)
	}
	tr.CounterSource = "ethtool"
	if got := captureText("tcx", "", tr); !strings.Contains(got, "counters read every 10 ms (source: ethtool)") {
		t.Errorf("capture line %q", got)
	}
}
