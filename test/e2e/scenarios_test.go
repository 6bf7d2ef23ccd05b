//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/report/schema"
)

// labRun runs `enaprobe lab run NAME` and returns its JSON report, the
// scenario's truth, and the recording from the bundle.
func labRun(t *testing.T, name string, extra ...string) (*analyzer.Result, catalog.Truth, *record.Recording) {
	t.Helper()
	privtest.RequireRoot(t)
	dir := t.TempDir()
	bundle, truthFile := filepath.Join(dir, "bundle"), filepath.Join(dir, "truth.json")
	args := append([]string{"lab", "run", name, "--format", "json", "-o", bundle, "--truth-file", truthFile}, extra...)
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("enaprobe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := validateReport(stdout.Bytes()); err != nil {
		t.Fatalf("report.json does not validate: %v", err)
	}
	var res analyzer.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	var truth catalog.Truth
	b, err := os.ReadFile(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatal(err)
	}
	rec, _, err := record.ReadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stderr:\n%s", stderr.String())
	checkReanalysis(t, bundle, &res)
	return &res, truth, rec
}

// validateReport checks a JSON report against internal/report/schema/report.schema.json.
func validateReport(doc []byte) error {
	sch, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.ReportJSON))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ReportID, sch); err != nil {
		return err
	}
	compiled, err := c.Compile(schema.ReportID)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return compiled.Validate(v)
}

func findingsOf(res *analyzer.Result, kind string) []analyzer.Finding {
	var out []analyzer.Finding
	for _, f := range res.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// mustFind is findingsOf, failing the test at once when there is none.
func mustFind(t *testing.T, res *analyzer.Result, kind string) []analyzer.Finding {
	t.Helper()
	fs := findingsOf(res, kind)
	if len(fs) == 0 {
		t.Fatalf("no %s finding", kind)
	}
	return fs
}

func logFindings(t *testing.T, res *analyzer.Result) {
	t.Helper()
	for _, f := range res.Findings {
		top := ""
		if len(f.Flows) > 0 {
			top = f.Flows[0].Src + " -> " + f.Flows[0].Dst
		}
		t.Logf("%s %s %.4f-%.4f s: %s [top %s]", f.Severity, f.Kind, f.StartOffsetS, f.EndOffsetS, f.Summary, top)
	}
}

func TestScenarioMicroBurst(t *testing.T) {
	const slack = 2 * time.Millisecond
	// A burst is one when its sender ran through it: descheduled for
	// longer than the slack in the middle of it (seen beside a CPU-bound
	// process: 250 sends over 10.5 ms, the drops all in its last 2), or
	// slowed throughout to more than twice the slack in all (its 250
	// sends take 1.7 to 2 ms; one took 5.8 ms with no send over 2 ms, and
	// its finding began 2.1 ms in), it came in parts, and the run did not
	// make its case. Such a run is made again, at most three times.
	var res *analyzer.Result
	var truth catalog.Truth
	var rec *record.Recording
	for attempt := 1; ; attempt++ {
		res, truth, rec = labRun(t, "micro-burst")
		if len(truth.Bursts) == 0 {
			t.Fatal("the scenario sent no burst")
		}
		paused := slices.ContainsFunc(truth.Bursts, func(b catalog.Burst) bool {
			return b.PauseNs > int64(slack) || b.EndNs-b.StartNs > 2*int64(slack)
		})
		if !paused {
			break
		}
		if attempt == 3 {
			t.Fatalf("in %d runs a burst's sender was descheduled for over %v inside it, or slowed past %v: the machine too loaded for the scenario", attempt, slack, 2*slack)
		}
		t.Logf("run %d: a burst's sender paused for over %v inside it, or took over %v (%+v); running the scenario again", attempt, slack, 2*slack, truth.Bursts)
	}
	logFindings(t, res)
	// One finding per burst, however many reads saw its counter move.
	// (The steady flows' pacer catches up in batches on a busy host, and a
	// batch over the 16 KiB bucket is a burst of its own: those findings
	// may come too, each naming its flow.)
	var bursts []analyzer.Finding
	for _, f := range findingsOf(res, analyzer.KindMicroburstOut) {
		if f.Severity != analyzer.SeverityInfo {
			bursts = append(bursts, f)
		}
	}
	for i, b := range truth.Bursts {
		from := time.Duration(b.StartNs - rec.Meta.Start.MonoNs).Seconds()
		to := time.Duration(b.EndNs - rec.Meta.Start.MonoNs).Seconds()
		var hit *analyzer.Finding
		overlapping := 0
		for j := range bursts {
			f := &bursts[j]
			if f.StartOffsetS < to+slack.Seconds() && f.EndOffsetS > from-slack.Seconds() {
				overlapping++
			}
			if f.StartOffsetS <= from+slack.Seconds() && f.EndOffsetS >= to-slack.Seconds() &&
				f.StartOffsetS >= from-slack.Seconds()-0.002 && f.EndOffsetS <= to+slack.Seconds()+0.002 {
				hit = f
			}
		}
		if overlapping != 1 {
			t.Errorf("burst %d at %.4f-%.4f s: %d microburst_out findings, want one", i, from, to, overlapping)
		}
		if hit == nil {
			t.Errorf("burst %d at %.4f-%.4f s: no microburst_out finding covering it within %v", i, from, to, slack)
			continue
		}
		if len(hit.Flows) == 0 || hit.Flows[0].Src != b.Src.String() {
			t.Errorf("burst %d: top flow %+v, want source %s", i, hit.Flows, b.Src)
		}
	}
	checkWireStart(t, rec, truth)
	checkStatedLag(t, bursts, truth)
}

// checkWireStart: the probe saw each burst's first packet leave within
// the span catalog.Burst.WireStart gives it (the first send returned
// after tc egress ran on its packet).
func checkWireStart(t *testing.T, rec *record.Recording, truth catalog.Truth) {
	t.Helper()
	for i, b := range truth.Bursts {
		from, to := b.WireStart()
		if b.FirstSentNs == 0 {
			t.Errorf("burst %d: the lab kept no first send", i)
			continue
		}
		first := int64(0)
		for _, f := range rec.Flows {
			if f.Key.Src == b.Src && f.Directions&2 != 0 && (first == 0 || f.FirstSeenNs < first) {
				first = f.FirstSeenNs
			}
		}
		t.Logf("burst %d: sender began %v before its first send returned, the probe saw its first packet %v after it began",
			i, time.Duration(to-from), time.Duration(first-from))
		if first < from || first > to {
			t.Errorf("burst %d: first packet seen at %d ns, outside its wire start [%d, %d]", i, first, from, to)
		}
	}
}

// checkStatedLag: the lag a finding states is the lab's within 5 ms: the
// mean of how late its counters showed each burst's last drop, and as far
// again as half the spread between them (the lab's poller showed the two
// bursts of one run up to 17 ms apart, and one lag cannot be both). The
// session that added it measured 43 runs of 44 within 5 ms of the mean
// and all within this bound, 2 to 8 load average, two spinning processes
// beside 20 of them (22 and 20 of 44 before the lag came from each
// burst's first drop too).
func checkStatedLag(t *testing.T, findings []analyzer.Finding, truth catalog.Truth) {
	t.Helper()
	var shown []float64
	for _, b := range truth.Bursts {
		if b.ShownAfterNs > 0 {
			shown = append(shown, time.Duration(b.ShownAfterNs).Seconds())
		}
	}
	if len(shown) == 0 || len(findings) == 0 || findings[0].Incident == nil {
		t.Fatalf("no lag to compare: the lab said how late it showed %d bursts, %d findings", len(shown), len(findings))
	}
	mean := 0.0
	for _, x := range shown {
		mean += x
	}
	mean /= float64(len(shown))
	bound := 0.005 + (slices.Max(shown)-slices.Min(shown))/2
	inc := findings[0].Incident
	t.Logf("lag stated %.1f ms (%.1f to %.1f), the lab's %.1f ms (bursts %.1f to %.1f ms)", inc.CounterLagS*1e3,
		inc.CounterLagLowS*1e3, inc.CounterLagHighS*1e3, mean*1e3, slices.Min(shown)*1e3, slices.Max(shown)*1e3)
	if d := inc.CounterLagS - mean; d > bound || d < -bound {
		t.Errorf("lag stated %.1f ms, the lab's %.1f ms: %.1f ms off, over %.1f", inc.CounterLagS*1e3, mean*1e3, d*1e3, bound*1e3)
	}
}

// checkIncidentSpan compares a finding's span with the drops the
// generators' models place. The lab's counters show a drop 20 ms late plus
// the age of the poll that read them (tens of ms on a busy host: each
// read runs nft twice), and a steady overshoot has no edge in the traffic
// to place its first and last drop by: the slack is two of the counter's
// usual steps, measured in the recording, and the look-back the finding
// used or the most the lab's counters showed a drop late, whichever is
// longer (within it, traffic over the limit that a burst bucket let
// through cannot be told from traffic dropped: a client paced by a busy
// host sends catch-up batches, some passed whole).
func checkIncidentSpan(t *testing.T, f analyzer.Finding, truth catalog.Truth, rec *record.Recording, late time.Duration) {
	t.Helper()
	inc := truth.Incidents[0]
	from := time.Duration(inc.StartNs - rec.Meta.Start.MonoNs).Seconds()
	to := time.Duration(inc.EndNs - rec.Meta.Start.MonoNs).Seconds()
	slack := 2*counterStep(rec, f.Incident.Counter).Seconds() + max(f.Incident.LookBackS, time.Duration(truth.CounterAgeMaxNs).Seconds()) + 0.005
	// The incident may start where the traffic that caused it did: an
	// allowance's burst lets a flood run over before its first drop.
	earliest := from
	for _, b := range truth.Bursts {
		if b.StartNs <= inc.StartNs {
			earliest = min(earliest, time.Duration(b.StartNs-rec.Meta.Start.MonoNs).Seconds())
		}
	}
	t.Logf("%s spans [%.4f, %.4f) s, the drops [%.4f, %.4f) s, the traffic from %.4f s; slack %.0f ms", f.Kind, f.StartOffsetS, f.EndOffsetS, from, to, earliest, slack*1e3)
	if f.StartOffsetS < earliest-slack || f.StartOffsetS > from+slack || f.EndOffsetS < to-slack || f.EndOffsetS > to+slack+late.Seconds() {
		t.Errorf("%s spans [%.4f, %.4f) s, the drops were over [%.4f, %.4f) s: more than %.0f ms off",
			f.Kind, f.StartOffsetS, f.EndOffsetS, from, to, slack*1e3)
	}
}

// counterStep is the median time between two rises of a counter: how
// coarsely the lab's polls (and the drops themselves) let it move.
func counterStep(rec *record.Recording, name string) time.Duration {
	var last uint64
	var lastNs int64
	var steps []int64
	for _, s := range rec.Counters {
		v, ok := s.Values[name]
		if !ok {
			continue
		}
		if v > last && lastNs > 0 {
			steps = append(steps, s.BeforeNs-lastNs)
		}
		if v != last {
			last, lastNs = v, s.BeforeNs
		}
	}
	if len(steps) == 0 {
		return 0
	}
	slices.Sort(steps)
	return time.Duration(steps[len(steps)/2])
}

// onlyOne returns the single finding of a kind.
func onlyOne(t *testing.T, res *analyzer.Result, kind string) analyzer.Finding {
	t.Helper()
	fs := mustFind(t, res, kind)
	if len(fs) != 1 {
		t.Fatalf("%d %s findings for one incident", len(fs), kind)
	}
	if fs[0].Incident == nil {
		t.Fatalf("%s without its incident", kind)
	}
	return fs[0]
}

// TestScenarioPPSOvershoot: three flows of small packets at 12 kpps for
// 2 s over the lab's 8 kpps, no allowance given, the counters published
// every 100 ms (phase random) and shown 20 ms late, read every 10 ms: one
// pps_exceeded naming the instance, the allowance learned within 15% of
// 8 kpps, the refresh within 10% of 100 ms, and the lag within 5 ms of the
// lab's, as late as the lab showed this incident's jumps (the median of
// each jump's: how old its value was where it became visible), and as far
// again as half their middle half's spread, as one lag cannot be every
// jump's (a poll is half a millisecond, but the poller waits for the CPU
// on a busy host). The session that added it measured 28 runs' bundles:
// 27 within 5 ms, the last 5.1, beside two CPU-bound processes for 16.
// A stall of the sender pauses the drops: one CI run stated 0 to 76 ms,
// 38 where the jumps' median was 21.4, most likely a pause that widened
// every jump's lag (pauseWiden in the analyzer, since).
func TestScenarioPPSOvershoot(t *testing.T) {
	res, truth, rec := labRun(t, "pps-overshoot", "--allowance", "unknown", "--counter-refresh", "100ms")
	logFindings(t, res)
	for _, f := range res.Findings {
		if f.Severity != analyzer.SeverityInfo && f.Kind != analyzer.KindPPSExceeded {
			t.Errorf("%s %s finding beside the overshoot", f.Severity, f.Kind)
		}
	}
	f := onlyOne(t, res, analyzer.KindPPSExceeded)
	if len(f.Flows) == 0 || !strings.HasPrefix(f.Flows[0].Src, lab.InstanceAddr.String()+":") {
		t.Errorf("pps_exceeded flows %+v, want the instance's small-packet flows first", f.Flows)
	}
	inc := f.Incident
	if la := inc.LearnedAllowance; la == nil || la.Unit != "pps" || math.Abs(la.Value-8000) > 0.15*8000 {
		t.Errorf("learned allowance %+v, want within 15%% of the lab's 8000 pps", la)
	}
	if !inc.CounterRefreshKnown || math.Abs(inc.CounterRefreshS-0.1) > 0.01 {
		t.Errorf("refresh stated %.4f s (known %v), want within 10%% of the lab's 100 ms", inc.CounterRefreshS, inc.CounterRefreshKnown)
	}
	from := rec.Meta.Start.MonoNs + int64(f.StartOffsetS*1e9)
	to := rec.Meta.Start.MonoNs + int64(f.EndOffsetS*1e9) + truth.CounterLagNs + truth.CounterRefreshNs + int64(50*time.Millisecond)
	ages := truth.JumpAges(inc.Counter, from, to)
	if len(ages) < 10 {
		t.Fatalf("the lab recorded %d jumps of %s over the incident, want a jump at most refreshes of 2 s", len(ages), inc.Counter)
	}
	median := ages[len(ages)/2]
	spread := ages[3*len(ages)/4] - ages[len(ages)/4]
	bound := 5*time.Millisecond + spread/2
	stated := time.Duration(inc.CounterLagS * 1e9)
	t.Logf("lag stated %v (%v to %v), the lab's jumps %v (middle half %v to %v, %d jumps), its mean delay %v; refresh %.4f s; allowance %+v",
		stated.Round(10*time.Microsecond), time.Duration(inc.CounterLagLowS*1e9).Round(10*time.Microsecond), time.Duration(inc.CounterLagHighS*1e9).Round(10*time.Microsecond),
		median.Round(10*time.Microsecond), ages[len(ages)/4].Round(10*time.Microsecond), ages[3*len(ages)/4].Round(10*time.Microsecond), len(ages),
		time.Duration(truth.CounterLagNs).Round(10*time.Microsecond), inc.CounterRefreshS, inc.LearnedAllowance)
	if d := stated - median; d > bound || d < -bound {
		t.Errorf("lag stated %v, the lab's jumps %v: %v off, over %v", stated, median, d, bound)
	}
}

func TestScenarioFlowAtCap(t *testing.T) {
	res, _, _ := labRun(t, "flow-at-cap")
	logFindings(t, res)
	caps := mustFind(t, res, analyzer.KindFlowAtCap)
	f := caps[0].Flows
	if len(f) == 0 || !strings.HasPrefix(f[0].Src, lab.InstanceAddr.String()+":") || !strings.HasSuffix(f[0].Dst, ":5001") {
		t.Errorf("flow_at_cap flows %+v, want the upload to :%d", f, lab.BulkPort)
	}
	for _, c := range res.Counters {
		if c.Kind == "counter" && c.Delta != 0 {
			t.Errorf("counter %s moved by %d: the per-flow cap must move none", c.Name, c.Delta)
		}
	}
}

func TestScenarioLinkLocal(t *testing.T) {
	for _, name := range []string{"link-local", "link-local-mild"} {
		t.Run(name, func(t *testing.T) {
			res, truth, rec := labRun(t, name)
			logFindings(t, res)
			f := onlyOne(t, res, analyzer.KindLinkLocalExceeded)
			if len(f.Flows) == 0 || f.Flows[0].Src != truth.Culprit.String() {
				t.Errorf("linklocal_exceeded flows %+v, want the DNS client %s first", f.Flows, truth.Culprit)
			}
			// The lab's clients are sockets of the enaprobe process itself.
			if len(f.Owners) == 0 || f.Owners[0].Owner.Comm != "enaprobe" || f.Owners[0].Owner.How != "socket" ||
				len(f.Flows) == 0 || f.Flows[0].Owner == nil || f.Flows[0].Owner.PID != f.Owners[0].Owner.PID {
				t.Errorf("linklocal_exceeded owners %+v, first flow's %+v: want the enaprobe process by socket", f.Owners, f.Flows)
			}
			if len(truth.Incidents) != 1 {
				t.Fatalf("the model of the limit dropped nothing: %v", truth.Notes)
			}
			checkIncidentSpan(t, f, truth, rec, 0)
		})
	}
}

func TestScenarioConnectionFlood(t *testing.T) {
	res, truth, rec := labRun(t, "connection-flood")
	logFindings(t, res)
	f := onlyOne(t, res, analyzer.KindConntrackExceeded)
	src := f.Flows
	if len(src) == 0 {
		t.Fatal("conntrack_exceeded names no source")
	}
	ap, err := netip.ParseAddrPort(strings.Replace(src[0].Src, ":*", ":0", 1))
	if err != nil || ap.Addr() != lab.InstanceAddr || src[0].Dst != netip.AddrPortFrom(lab.PeerAddr, lab.HoldPort).String() {
		t.Errorf("conntrack_exceeded source %q -> %q, want the instance %s to the hold port", src[0].Src, src[0].Dst, lab.InstanceAddr)
	}
	// The refused connections retried every second: the wire's proof.
	if src[0].SYNsRetried == 0 {
		t.Errorf("no retried SYN counted: %+v", src[0])
	}
	ev := map[string]float64{}
	for _, e := range f.Evidence {
		ev[e.Name] = e.Value
	}
	if ev["syns_first"]+ev["syns_retried"] != float64(src[0].SYNs) || ev["syns_retried"] != float64(src[0].SYNsRetried) {
		t.Errorf("evidence %v first + %v retried SYNs, the source %d with %d retried: they must agree",
			ev["syns_first"], ev["syns_retried"], src[0].SYNs, src[0].SYNsRetried)
	}
	if len(f.Gauge) < 2 || f.Gauge[len(f.Gauge)-1].Value != 0 {
		t.Errorf("conntrack_allowance_available course %+v, want it to reach 0", f.Gauge)
	}
	if len(truth.Incidents) != 1 {
		t.Fatalf("no connection was refused: %v", truth.Notes)
	}
	// The kernel's timer wheel rounds a SYN retransmit timer of a second
	// up by as much as 32 ms (HZ 250), each of three retries: the last
	// retry may come up to about 100 ms after its model (seen: 70 ms).
	checkIncidentSpan(t, f, truth, rec, 150*time.Millisecond)
}

func TestScenarioClean(t *testing.T) {
	res, _, _ := labRun(t, "clean")
	logFindings(t, res)
	// Nothing worth a reader's time: not even an info finding.
	for _, f := range res.Findings {
		t.Errorf("clean traffic gave %s %s: %s", f.Severity, f.Kind, f.Summary)
	}
	var packets uint64
	for _, tt := range res.Totals {
		packets += tt.Packets
	}
	if packets == 0 {
		t.Error("the clean scenario traced no packet")
	}
}
