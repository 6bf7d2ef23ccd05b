// Command labscore re-analyzes bundles of `enaprobe lab run` against what
// the lab's traffic generators did, with the allowances each run was
// analyzed with and without them, and says for each whether its findings
// were right: the measure the analyzer's changes are judged by
// (docs/development.md, "Scoring the analyzer on lab runs").
//
//	for i in 1 2 3; do sudo enaprobe lab run micro-burst -o runs/m$i --truth-file runs/m$i.truth.json; done
//	go run ./test/labscore runs
//
// A run is right when every finding above info of the scenario's kind
// names one of its bursts first and starts within 2 ms of it (5 ms with
// counters refreshed once a second or slower), each burst has exactly one,
// and no finding of another kind is above info. The lag the finding states
// is classed against the lab's: within 5 ms, off but inside the range it
// states, or outside it; the refresh it states as known, within 10% of the
// lab's or wrong, or not told.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/record"
)

// expectation is what a scenario's run should report.
type expectation struct {
	kind string
	// perBurst: one finding per burst, each naming its burst's source;
	// otherwise one finding for the run, naming the truth's culprit (or
	// the first burst's source).
	perBurst bool
	// sustained: an overshoot with no edge to place its start by; only
	// the count, the culprit's address and the learned allowance are
	// checked.
	sustained bool
}

var scenarios = map[string]expectation{
	"micro-burst":      {kind: analyzer.KindMicroburstOut, perBurst: true},
	"impact-dropped":   {kind: analyzer.KindMicroburstOut},
	"impact-queued":    {kind: analyzer.KindMicroburstOut},
	"impact-inbound":   {kind: analyzer.KindMicroburstIn},
	"pps-overshoot":    {kind: analyzer.KindPPSExceeded, sustained: true},
	"link-local":       {kind: analyzer.KindLinkLocalExceeded, sustained: true},
	"link-local-mild":  {kind: analyzer.KindLinkLocalExceeded, sustained: true},
	"connection-flood": {kind: analyzer.KindConntrackExceeded, sustained: true},
}

func main() {
	only := flag.String("mode", "", "recorded or unknown: score one way only (default both)")
	flag.BoolVar(&givenRefresh, "given-refresh", false, "analyze with the lab's counter refresh given (--counter-refresh), as a user who learned it from a longer run would")
	verbose := flag.Bool("v", false, "print every finding above info of a run that is not right")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: labscore [-mode recorded|unknown] [-v] DIR...  (each DIR holds NAME/ bundles and NAME.truth.json)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	tally := map[string]map[string]int{}
	for _, dir := range flag.Args() {
		names, err := bundles(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "labscore:", err)
			os.Exit(1)
		}
		for _, name := range names {
			for _, mode := range []string{"recorded", "unknown"} {
				if *only != "" && *only != mode {
					continue
				}
				s, err := score(dir, name, mode)
				if err != nil {
					fmt.Fprintf(os.Stderr, "labscore: %s: %v\n", name, err)
					continue
				}
				fmt.Printf("%-40s %-8s %s\n", filepath.Join(filepath.Base(dir), name), mode, s.line())
				if *verbose && !s.right {
					for _, f := range s.findings {
						fmt.Printf("    %s\n", f)
					}
				}
				if tally[mode] == nil {
					tally[mode] = map[string]int{}
				}
				tally[mode]["runs"]++
				if s.right {
					tally[mode]["right"]++
				}
				tally[mode]["lag "+s.lagClass]++
				if s.shownOnce {
					tally[mode]["shown once"]++
				}
				tally[mode]["refresh "+s.refreshClass]++
				tally[mode]["own"] += s.own
			}
		}
	}
	for _, mode := range []string{"recorded", "unknown"} {
		if t := tally[mode]; t != nil {
			fmt.Printf("%s: right %d of %d (%d findings of background flows' own overflows); lag within 5 ms %d, off inside its range %d, outside it %d, none %d\n", mode,
				t["right"], t["runs"], t["own"], t["lag within"], t["lag inside"], t["lag outside"], t["lag none"])
			fmt.Printf("%s: refresh stated within 10%% %d, wrong %d, not told %d\n", mode, t["refresh within"], t["refresh wrong"], t["refresh untold"])
			fmt.Printf("%s: lags over 5 ms off behind a refresh whose counter changed once a burst %d\n", mode, t["shown once"])
		}
	}
}

// bundles lists the runs of dir: NAME/recording.json.gz beside NAME.truth.json.
func bundles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "recording.json.gz")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name()+".truth.json")); err != nil {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

type verdict struct {
	right    bool
	own      int // findings of a background flow's own overflows (ownOverflow)
	why      []string
	lagClass string // within, inside, outside, none
	// shownOnce: behind a refresh, the lag off by over 5 ms where the
	// counter changed once a burst (changes): told to within a refresh
	// less the drops' span at best, whatever the analyzer does.
	shownOnce    bool
	refreshClass string // within (10%), wrong, untold
	lag          string
	findings     []string
}

func (v verdict) line() string {
	s := "WRONG"
	if v.right {
		s = "right"
	}
	why := v.why
	if v.own > 0 {
		why = append(slices.Clone(why), fmt.Sprintf("(%d of a background flow's own overflows)", v.own))
	}
	if v.shownOnce {
		why = append(slices.Clone(why), "(lag shown at one change a burst)")
	}
	return fmt.Sprintf("%-5s lag %-7s %-34s refresh %-6s %s", s, v.lagClass, v.lag, v.refreshClass, strings.Join(why, "; "))
}

// burstReach is how long after a burst's last packet the lab's counter
// may still move for it: its queue draining (the truth's QueueDelay)
// and what waited behind it catching up, which are the burst's incident.
const burstReach = 200 * time.Millisecond

// ownOverflow: a finding naming a flow that sent none of the bursts is
// right where the lab's counter really moved for that flow's traffic:
// the TCP or download flow beside the bursts overflows the lab's bucket
// now and then on its own (a 68 kB bunch over a 64 KiB bucket, 4 drops),
// which the truth's bursts do not list. So some read of the finding's
// counter changed, and the drops it can show (made after the read before
// it, less the most the lab's counters were late, a refresh, and the
// most its queue held a packet: the lab counts what its shaper held back
// as it polls) meet
// the finding's span and none of the bursts, from each one's first
// packet to burstReach and its queue's delay after its last.
func ownOverflow(rec *record.Recording, truth catalog.Truth, f analyzer.Finding) bool {
	if f.Incident == nil || len(f.Flows) == 0 {
		return false
	}
	for _, b := range truth.Bursts {
		if f.Flows[0].Src == b.Src.String() {
			return false
		}
	}
	t0 := rec.Meta.Start.MonoNs
	from := t0 + int64((f.StartOffsetS-0.002)*1e9)
	to := t0 + int64((f.EndOffsetS+0.002)*1e9)
	early := truth.CounterAgeMaxNs + truth.CounterRefreshNs + int64(truth.QueueDelay)
	var prev *record.CounterSample
	for i := range rec.Counters {
		c := &rec.Counters[i]
		if c.Interface != f.Interface || c.Err != "" {
			continue
		}
		v, ok := c.Values[f.Incident.Counter]
		if !ok {
			continue
		}
		if prev != nil && v > prev.Values[f.Incident.Counter] {
			lo, hi := prev.BeforeNs-early, c.AfterNs
			clear := lo < to && hi > from
			for _, b := range truth.Bursts {
				if lo < b.EndNs+int64(truth.QueueDelay+burstReach) && hi > b.StartNs {
					clear = false
				}
			}
			if clear {
				return true
			}
		}
		prev = c
	}
	return false
}

// givenRefresh: analyze with the lab's counter refresh given.
var givenRefresh bool

func score(dir, name, mode string) (verdict, error) {
	var v verdict
	rec, err := record.ReadFile(filepath.Join(dir, name, "recording.json.gz"))
	if err != nil {
		return v, err
	}
	var truth catalog.Truth
	b, err := os.ReadFile(filepath.Join(dir, name+".truth.json"))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		return v, fmt.Errorf("truth: %w", err)
	}
	scenario, err := scenarioOf(filepath.Join(dir, name, "environment.json"))
	if err != nil {
		return v, err
	}
	exp, ok := scenarios[scenario]
	if !ok {
		return v, fmt.Errorf("scenario %q is not scored", scenario)
	}
	opt, ok := analyzer.RecordedOptions(rec)
	if !ok {
		return v, fmt.Errorf("the recording kept no analysis options")
	}
	if mode == "unknown" {
		opt.BaselineBps, opt.BurstBps, opt.PPSAllowance = 0, 0, 0
	}
	if givenRefresh {
		opt.CounterRefresh = time.Duration(truth.CounterRefreshNs)
		if opt.CounterRefresh == 0 {
			opt.CounterRefresh = analyzer.RefreshEveryRead
		}
	}
	res := analyzer.Analyze(rec, opt)
	var found []analyzer.Finding
	for _, f := range res.Findings {
		if f.Severity == analyzer.SeverityInfo {
			continue
		}
		top := "-"
		if len(f.Flows) > 0 {
			top = f.Flows[0].Src
		}
		v.findings = append(v.findings, fmt.Sprintf("%s %s [%.4f, %.4f) %s", f.Severity, f.Kind, f.StartOffsetS, f.EndOffsetS, top))
		if f.Kind != exp.kind {
			v.why = append(v.why, fmt.Sprintf("%s above info", f.Kind))
			continue
		}
		found = append(found, f)
	}
	offset := func(ns int64) float64 { return float64(ns-rec.Meta.Start.MonoNs) / 1e9 }
	if exp.sustained {
		v.sustained(found, truth, rec)
	} else {
		slack := 0.002
		if truth.CounterRefreshNs >= int64(time.Second) {
			slack = 0.005
		}
		// A burst starts when its first packet reached the wire
		// (catalog.Burst.WireStart), its finding within slack of that.
		type want struct {
			start, by float64
			src       string
		}
		var wants []want
		for _, b := range truth.Bursts {
			src := b.Src.String()
			if !exp.perBurst && truth.Culprit.IsValid() {
				src = truth.Culprit.String()
			}
			from, to := b.WireStart()
			wants = append(wants, want{offset(from), offset(to), src})
			if !exp.perBurst {
				break
			}
		}
		used := make([]bool, len(found))
		for _, w := range wants {
			hit := -1
			for j, f := range found {
				if !used[j] && f.StartOffsetS >= w.start-slack && f.StartOffsetS <= w.by+slack && len(f.Flows) > 0 && f.Flows[0].Src == w.src {
					hit = j
					break
				}
			}
			if hit < 0 {
				near := "none"
				for _, f := range found {
					if d := f.StartOffsetS - w.start; math.Abs(d) < 1 {
						top := "-"
						if len(f.Flows) > 0 {
							top = f.Flows[0].Src
						}
						near = fmt.Sprintf("%+.1f ms %s", d*1e3, top)
						break
					}
				}
				v.why = append(v.why, fmt.Sprintf("burst at %.4f s missed (nearest %s)", w.start, near))
				continue
			}
			used[hit] = true
		}
		for j, f := range found {
			if used[j] {
				continue
			}
			if ownOverflow(rec, truth, f) {
				v.own++
				continue
			}
			top := "-"
			if len(f.Flows) > 0 {
				top = f.Flows[0].Src
			}
			v.why = append(v.why, fmt.Sprintf("extra at %.4f s naming %s", f.StartOffsetS, top))
		}
	}
	v.right = len(v.why) == 0
	v.classLag(found, truth)
	v.shownOnce = v.lagClass != "within" && v.lagClass != "none" && !exp.sustained && truth.CounterRefreshNs > 0 &&
		changes(rec, found[0].Interface, found[0].Incident.Counter) <= len(truth.Bursts)
	v.classRefresh(found, truth)
	return v, nil
}

// sustained checks an overshoot: one finding naming the instance's
// traffic, and for packets/s the allowance learned within 15%.
func (v *verdict) sustained(found []analyzer.Finding, truth catalog.Truth, rec *record.Recording) {
	if len(found) != 1 {
		v.why = append(v.why, fmt.Sprintf("%d findings, want one", len(found)))
		return
	}
	f := found[0]
	if c := truth.Culprit; c.IsValid() {
		// A culprit without a port is a host: any of its flows.
		want := c.String()
		ok := len(f.Flows) > 0 && f.Flows[0].Src == want
		if c.Port() == 0 && len(f.Flows) > 0 {
			top, err := netip.ParseAddrPort(f.Flows[0].Src)
			ok = err == nil && top.Addr() == c.Addr() || strings.HasPrefix(f.Flows[0].Src, c.Addr().String()+":")
		}
		v.why = appendIf(v.why, !ok, fmt.Sprintf("culprits %v, want %s first", srcs(f), want))
	}
	if f.Kind == analyzer.KindPPSExceeded && f.Incident != nil {
		if la := f.Incident.LearnedAllowance; la != nil {
			v.why = appendIf(v.why, math.Abs(la.Value-8000) > 0.15*8000, fmt.Sprintf("learned %.0f pps", la.Value))
		}
	}
}

func appendIf(s []string, cond bool, x string) []string {
	if cond {
		return append(s, x)
	}
	return s
}

func srcs(f analyzer.Finding) []string {
	var s []string
	for _, fl := range f.Flows {
		s = append(s, fl.Src)
	}
	return s
}

// classRefresh compares the refresh the first finding states with the
// lab's: within 10% (the bar), wrong, or untold (none stated as
// known, or no finding).
func (v *verdict) classRefresh(found []analyzer.Finding, truth catalog.Truth) {
	v.refreshClass = "untold"
	if len(found) == 0 || found[0].Incident == nil || !found[0].Incident.CounterRefreshKnown {
		return
	}
	got, lab := found[0].Incident.CounterRefreshS, float64(truth.CounterRefreshNs)/1e9
	v.refreshClass = "wrong"
	if math.Abs(got-lab) <= 0.1*lab || got == 0 && lab == 0 {
		v.refreshClass = "within"
	}
	if v.refreshClass == "wrong" {
		v.why = append(v.why, fmt.Sprintf("refresh stated %.1f ms, lab %.1f", got*1e3, lab*1e3))
	}
}

// changes is how many reads saw an interface's counter rise. Behind a
// refresh, a burst whose drops the counter showed at one change tells the
// lag only to within the refresh less the drops' span: the change says
// the drops became visible at that refresh, not where in the interval
// before it. Where it changed at two or more, the split of the count
// between them is what can tell more.
func changes(rec *record.Recording, iface, counter string) int {
	n := 0
	var prev *record.CounterSample
	for i := range rec.Counters {
		c := &rec.Counters[i]
		if c.Interface != iface || c.Err != "" {
			continue
		}
		if _, ok := c.Values[counter]; !ok {
			continue
		}
		if prev != nil && c.Values[counter] > prev.Values[counter] {
			n++
		}
		prev = c
	}
	return n
}

// longFlood is how long a burst must last for the lab's lag to be taken
// from its jumps' ages rather than from how late it showed its end.
const longFlood = 500 * time.Millisecond

// classLag compares the lag the first finding states with the lab's: the
// mean of how late it showed each burst, else the lag it was given. Behind
// a refresh, the lag it was given: how late it showed a burst holds the
// wait for the refresh, which the finding states apart. A flood
// (longFlood or longer) is shown at every read through it, so its lag is
// the median age of the jumps read through it: how late the lab showed
// its end is one poll's (a link-local flood beside two CPU-bound
// processes, 30 ms late: 40.8 ms after its end, where its jumps showed it
// 30.3 to 36.5 ms late).
func (v *verdict) classLag(found []analyzer.Finding, truth catalog.Truth) {
	v.lagClass = "none"
	if len(found) == 0 || found[0].Incident == nil {
		return
	}
	var shown []float64
	for _, b := range truth.Bursts {
		if b.ShownAfterNs > 0 {
			shown = append(shown, float64(b.ShownAfterNs)/1e9)
		}
	}
	lab := float64(truth.CounterLagNs) / 1e9
	if len(shown) > 0 && truth.CounterRefreshNs == 0 {
		lab = 0
		for _, x := range shown {
			lab += x
		}
		lab /= float64(len(shown))
	}
	inc := found[0].Incident
	if truth.CounterRefreshNs == 0 {
		var ages []time.Duration
		for _, b := range truth.Bursts {
			if b.EndNs-b.StartNs >= int64(longFlood) {
				ages = append(ages, truth.JumpAges(inc.Counter, b.StartNs, b.EndNs)...)
			}
		}
		if len(ages) > 0 {
			slices.Sort(ages)
			lab = ages[len(ages)/2].Seconds()
		}
	}
	v.lag = fmt.Sprintf("%.1f (%.1f-%.1f) lab %.1f ms", inc.CounterLagS*1e3, inc.CounterLagLowS*1e3, inc.CounterLagHighS*1e3, lab*1e3)
	switch {
	case math.Abs(inc.CounterLagS-lab) <= 0.005:
		v.lagClass = "within"
	case lab >= inc.CounterLagLowS-0.002 && lab <= inc.CounterLagHighS+0.002:
		v.lagClass = "inside"
	default:
		v.lagClass = "outside"
	}
}

// scenarioOf reads the scenario from the bundle's command line.
func scenarioOf(envPath string) (string, error) {
	b, err := os.ReadFile(envPath)
	if err != nil {
		return "", err
	}
	var env struct {
		CommandLine string `json:"command_line"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", fmt.Errorf("environment: %w", err)
	}
	args := strings.Fields(env.CommandLine)
	if i := slices.Index(args, "run"); i >= 0 && i+1 < len(args) {
		return args[i+1], nil
	}
	return "", fmt.Errorf("no lab scenario in %q", env.CommandLine)
}
