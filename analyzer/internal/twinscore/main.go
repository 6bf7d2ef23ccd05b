// Command twinscore scores the analyzer on synthetic runs (package synth)
// of one to four bursts at random times and rates, of bytes over a
// bandwidth allowance or of small packets over a packet-rate one, behind a
// counter refresh of 100 ms or 1 s at a random phase and a lag of 0, 30 ms,
// 250 ms or 1 s, each analyzed with its allowance given and without. Where
// the lag range the first incident states misses the device's lag, or the
// lag of a twin device whose reads are the same (synth.TwinLags), it
// claimed more than the reads tell. It counts the refresh the first
// incident states too: within 10% of the device's, off by more (each
// printed), or untold. The lab's scenarios send one or two
// bursts a second apart; a fleet's traffic does not. docs/development.md,
// "Scoring the analyzer on synthetic runs", says how to use it.
//
//	go run ./analyzer/internal/twinscore -n 300 -seed 7
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

const traceLen = synth.BurstRunDuration

// trial is one random run, its spec, and how it is analyzed with its
// allowance given.
type trial struct {
	run   synth.BurstRun
	spec  synth.Spec
	kind  string
	given func(*analyzer.Options)
}

// newTrial draws a run (synth.BurstRun): bursts of bytes or of packets,
// 150 ms to 1 s apart from 0.3 s on, each at 0.8 to 1.2 times the usual
// rate, beside a steady flow each way.
func newTrial(r *rand.Rand) trial {
	var t trial
	var run synth.BurstRun
	if r.IntN(2) == 0 {
		run.Bytes, t.kind = true, analyzer.KindMicroburstOut
		t.given = func(o *analyzer.Options) {
			o.BaselineBps, o.BurstBps = synth.BurstRunAllowanceBps, synth.BurstRunAllowanceBps
		}
	} else {
		t.kind = analyzer.KindPPSExceeded
		t.given = func(o *analyzer.Options) { o.PPSAllowance = synth.BurstRunAllowancePPS }
	}
	from := 300*time.Millisecond + time.Duration(r.IntN(300))*time.Millisecond
	for n := 1 + r.IntN(4); n > 0 && from < traceLen/2; n-- {
		run.Starts = append(run.Starts, from)
		run.Bps = append(run.Bps, synth.BurstRunBps(run.Bytes)*(0.8+0.4*r.Float64()))
		from += time.Duration(150+r.IntN(850)) * time.Millisecond
	}
	run.Seed = r.Uint64()
	run.Refresh = []time.Duration{100 * time.Millisecond, time.Second}[r.IntN(2)]
	run.Phase = time.Duration(r.Int64N(int64(run.Refresh)))
	run.Lag = []time.Duration{0, 30 * time.Millisecond, 250 * time.Millisecond, time.Second}[r.IntN(4)]
	t.run, t.spec = run, run.Spec()
	return t
}

func main() {
	n := flag.Int("n", 200, "runs to draw")
	seed := flag.Uint64("seed", 1, "seed of the draw")
	show := flag.Int("run", -1, "print run N's drops, counter changes and findings")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	var analyses, missed, narrow, named, bursts, together, extra int
	// byLag and told tally the ranges that missed by the device's lag,
	// and how many of them stated a refresh the run told.
	byLag := map[time.Duration]int{}
	told := 0
	// The refresh the first incident states: within 10% of the device's
	// (issue 22's bound), off by more, or untold.
	var refreshRight, refreshWrong, refreshUntold int
	for i := range *n {
		t := newTrial(r)
		if *show >= 0 && i != *show {
			continue // drawn all the same: each run's draw follows the one before
		}
		rec, facts := synth.Generate(t.spec)
		low, high := synth.TwinLags(t.spec, analyzer.MaxCounterLag)
		for _, given := range []bool{false, true} {
			opt := analyzer.DefaultOptions()
			if given {
				t.given(&opt)
			}
			res := analyzer.Analyze(rec, opt)
			if i == *show {
				detail(rec, facts, res, t, given)
			}
			analyses++
			bursts += len(t.run.Starts)
			shared := shownTogether(t, facts)
			for k, ok := range namedEach(res, t) {
				switch {
				case ok:
					named++
				case shared[k]:
					together++
				}
			}
			if n := atNoBurst(res, t); n > 0 {
				extra += n
				fmt.Printf("run %d %s given=%v bursts %v refresh %v phase %v lag %v: %d findings at no burst\n",
					i, t.kind, given, t.run.Starts, t.spec.CounterRefresh, t.spec.RefreshPhase.Round(time.Millisecond), t.spec.CounterLag, n)
			}
			var inc *analyzer.Incident
			if fs := incidentFindings(res, t); len(fs) > 0 {
				inc = fs[0].Incident
			}
			if inc == nil {
				fmt.Printf("run %d given=%v: no %s finding\n", i, given, t.kind)
				continue
			}
			switch stated := time.Duration(inc.CounterRefreshS * float64(time.Second)); {
			case !inc.CounterRefreshKnown:
				refreshUntold++
			case math.Abs(float64(stated-t.spec.CounterRefresh)) <= 0.1*float64(t.spec.CounterRefresh):
				refreshRight++
			default:
				refreshWrong++
				fmt.Printf("run %d %s given=%v bursts %v refresh %v phase %v lag %v: refresh stated %v\n",
					i, t.kind, given, t.run.Starts, t.spec.CounterRefresh, t.spec.RefreshPhase.Round(time.Millisecond), t.spec.CounterLag, stated.Round(time.Millisecond))
			}
			lag := t.spec.CounterLag.Seconds()
			const slack = 0.001 // a fine window at each end
			switch {
			case inc.CounterLagLowS > lag+slack || inc.CounterLagHighS < lag-slack:
				missed++
			case inc.CounterLagLowS > low.Seconds()+slack || inc.CounterLagHighS < high.Seconds()-slack:
				narrow++
			default:
				continue
			}
			byLag[t.spec.CounterLag]++
			if inc.CounterRefreshKnown {
				told++
			}
			fmt.Printf("run %d %s given=%v bursts %v refresh %v phase %v lag %v: stated %.1f ms (%.1f to %.1f) refresh %s, the same reads from lags %v to %v\n",
				i, t.kind, given, t.run.Starts, t.spec.CounterRefresh, t.spec.RefreshPhase.Round(time.Millisecond), t.spec.CounterLag,
				inc.CounterLagS*1e3, inc.CounterLagLowS*1e3, inc.CounterLagHighS*1e3, refreshStated(inc), low.Round(time.Millisecond), high.Round(time.Millisecond))
		}
	}
	fmt.Printf("%d analyses of %d runs: lag range missing the device's lag %d, missing only a twin's %d; bursts a finding starts within 5 ms of %d of %d\n",
		analyses, *n, missed, narrow, named, bursts)
	fmt.Printf("of the %d bursts no finding starts at, %d were shown at a change with another burst; findings at no burst: %d\n",
		bursts-named, together, extra)
	fmt.Printf("of those ranges, by the device's lag: 0: %d, 30ms: %d, 250ms: %d, 1s: %d; behind a refresh the run told: %d\n",
		byLag[0], byLag[30*time.Millisecond], byLag[250*time.Millisecond], byLag[time.Second], told)
	fmt.Printf("refresh stated within 10%% of the device's %d, off by more %d, untold %d\n", refreshRight, refreshWrong, refreshUntold)
	if missed+narrow > 0 {
		os.Exit(1)
	}
}

// refreshStated is the refresh an incident states, or what it took the
// refresh as where it could not tell it.
func refreshStated(inc *analyzer.Incident) string {
	r := time.Duration(inc.CounterRefreshS * float64(time.Second)).Round(time.Millisecond)
	if inc.CounterRefreshKnown {
		return r.String()
	}
	return "untold (taken as " + r.String() + ")"
}

// incidentFindings are res's findings of t's kind above info.
func incidentFindings(res *analyzer.Result, t trial) []analyzer.Finding {
	var out []analyzer.Finding
	for _, f := range res.Findings {
		if f.Kind == t.kind && f.Severity != analyzer.SeverityInfo && f.Incident != nil {
			out = append(out, f)
		}
	}
	return out
}

// startsAt tells whether finding f starts within 5 ms of at.
func startsAt(f analyzer.Finding, at time.Duration) bool {
	d := time.Duration(f.StartOffsetS*float64(time.Second)) - at
	return d > -5*time.Millisecond && d < 5*time.Millisecond
}

// namedEach tells, for each of t's bursts, whether a finding starts at it.
func namedEach(res *analyzer.Result, t trial) []bool {
	named := make([]bool, len(t.run.Starts))
	for _, f := range incidentFindings(res, t) {
		for k, at := range t.run.Starts {
			named[k] = named[k] || startsAt(f, at)
		}
	}
	return named
}

// atNoBurst is how many findings start at none of t's bursts.
func atNoBurst(res *analyzer.Result, t trial) int {
	n := 0
	for _, f := range incidentFindings(res, t) {
		if !slices.ContainsFunc(t.run.Starts, func(at time.Duration) bool { return startsAt(f, at) }) {
			n++
		}
	}
	return n
}

// shownTogether tells, for each of t's bursts, whether the device showed
// its drops at a refresh that showed another burst's too (facts: the
// device's drops, each burst's from its start to the next one's).
func shownTogether(t trial, facts synth.Facts) []bool {
	counter := map[string]string{analyzer.KindMicroburstOut: "bw_out_allowance_exceeded", analyzer.KindPPSExceeded: "pps_allowance_exceeded"}[t.kind]
	refresh, phase, lag := t.spec.CounterRefresh, t.spec.RefreshPhase, t.spec.CounterLag
	shown := func(d time.Duration) time.Duration { // the refresh that shows a drop at d
		return phase + (d+lag-phase+refresh-1)/refresh*refresh
	}
	type refreshes struct{ first, last time.Duration }
	of := make([]*refreshes, len(t.run.Starts))
	for k, at := range t.run.Starts {
		end := time.Duration(math.MaxInt64)
		if k+1 < len(t.run.Starts) {
			end = t.run.Starts[k+1]
		}
		for _, e := range facts.Drops["eth0"][counter] {
			if e.From < at || e.From >= end {
				continue
			}
			if of[k] == nil {
				of[k] = &refreshes{shown(e.From), shown(e.To)}
			}
			of[k].last = shown(e.To)
		}
	}
	together := make([]bool, len(of))
	for k, r := range of {
		for m, o := range of {
			if m != k && r != nil && o != nil && o.first <= r.last && r.first <= o.last {
				together[k] = true
			}
		}
	}
	return together
}

// detail prints what one run dropped and when (the device's truth), when
// its counter showed it, and each finding of its kind.
func detail(rec *record.Recording, facts synth.Facts, res *analyzer.Result, t trial, given bool) {
	ms := func(ns int64) float64 { return float64(ns-rec.Meta.Start.MonoNs) / 1e6 }
	counter := map[string]string{analyzer.KindMicroburstOut: "bw_out_allowance_exceeded", analyzer.KindPPSExceeded: "pps_allowance_exceeded"}[t.kind]
	fmt.Printf("given=%v bursts %v refresh %v phase %v lag %v\n", given, t.run.Starts, t.spec.CounterRefresh, t.spec.RefreshPhase, t.spec.CounterLag)
	for _, p := range t.spec.Flows[0].Phases {
		fmt.Printf("  burst %v to %v at %v bit/s\n", p.From, p.To, p.Bps)
	}
	fmt.Printf("  synth seed %d\n", t.spec.Seed)
	for _, e := range facts.Drops["eth0"][counter] {
		fmt.Printf("  drops %v to %v\n", e.From, e.To)
	}
	var prev *record.CounterSample
	for i := range rec.Counters {
		c := &rec.Counters[i]
		if prev != nil && c.Values[counter] > prev.Values[counter] {
			fmt.Printf("  change +%d read (%.1f, %.1f] ms\n", c.Values[counter]-prev.Values[counter], ms(prev.AfterNs), ms(c.AfterNs))
		}
		prev = c
	}
	for _, f := range res.Findings {
		if f.Kind != t.kind || f.Incident == nil {
			continue
		}
		inc := f.Incident
		var top string
		if len(f.Flows) > 0 {
			top = f.Flows[0].Src + ">" + f.Flows[0].Dst
		}
		fmt.Printf("  finding %s %.1f to %.1f ms, lag %.1f (%.1f to %.1f) ms %s, refresh %s, first %s\n", f.Severity, f.StartOffsetS*1e3, f.EndOffsetS*1e3,
			inc.CounterLagS*1e3, inc.CounterLagLowS*1e3, inc.CounterLagHighS*1e3, inc.CounterLagSource, refreshStated(inc), top)
	}
}
