package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// rateValue is a flag in bits per second written with units: 40Mbit, 5Gbit,
// 1.5Gbps, 10MB/s (bytes).
type rateValue struct{ bps *float64 }

func (r rateValue) String() string {
	if r.bps == nil || *r.bps == 0 {
		return ""
	}
	return limits.FormatBps(*r.bps)
}

func (r rateValue) Set(s string) error {
	v, err := limits.ParseRate(s)
	if err != nil {
		return err
	}
	// A bare number would be bit/s: "--flow-limit 5" meaning 5 bit/s is
	// never what was meant.
	if strings.TrimLeft(strings.TrimSpace(s), "0123456789.eE+-") == "" {
		return fmt.Errorf("%q has no unit: write it with one, e.g. %sGbit, %sMbit or %sMB/s (bytes)", s, s, s, s)
	}
	if v <= 0 {
		return fmt.Errorf("%q: a rate must be above zero", s)
	}
	*r.bps = v
	return nil
}

func (rateValue) Type() string { return "rate" }

// maxCounterLagFlag bounds --counter-lag: a counter later than this by
// seconds says nothing about which traffic moved it.
const maxCounterLagFlag = 10 * time.Second

// analysisFlags are the limits and thresholds both trace and analyze take.
type analysisFlags struct {
	fs           *pflag.FlagSet
	instanceType string
	baseline     float64
	burst        float64
	flowLimit    float64
	ppsAllowance float64
	window       time.Duration
	counterLag   string
}

func (a *analysisFlags) register(fs *pflag.FlagSet) {
	a.fs = fs
	fs.StringVar(&a.instanceType, "instance-type", "", "EC2 instance type whose bandwidth allowance to compare with, e.g. c6i.xlarge (default: from IMDS on EC2, or the recording)")
	fs.Var(rateValue{&a.baseline}, "baseline", "aggregate baseline bandwidth per direction, a rate with its unit, e.g. 12.5Gbit (default: the instance table)")
	fs.Var(rateValue{&a.burst}, "burst", "aggregate burst bandwidth per direction, a rate with its unit, e.g. 25Gbit (default: the instance table)")
	fs.Var(rateValue{&a.flowLimit}, "flow-limit", "per-flow (5-tuple) cap, a rate with its unit, e.g. 5Gbit (default 5Gbit; 10Gbit in a cluster placement group, 25Gbit with ENA Express, when discovered)")
	fs.Float64Var(&a.ppsAllowance, "pps-allowance", 0, "instance allowance in packets/s, both directions, e.g. 400000, if you know it (AWS does not publish it)")
	fs.DurationVar(&a.window, "window", time.Millisecond, "fine window that findings are located with, a duration, e.g. 1ms (at least the bucket)")
	fs.StringVar(&a.counterLag, "counter-lag", "auto", "how long after the traffic the allowance counters show a drop: auto (learned per counter from the run, at most 1s), or a duration from 0 to 10s, e.g. 40ms (0: only between the two reads around a jump)")
}

func (a *analysisFlags) changed(name string) bool { return a.fs != nil && a.fs.Changed(name) }

// check refuses values that mean nothing.
func (a *analysisFlags) check() error {
	if a.window <= 0 {
		return usagef("--window %v: must be positive, e.g. 1ms", a.window)
	}
	if a.changed("pps-allowance") && !(a.ppsAllowance > 0) {
		return usagef("--pps-allowance %v: must be a packet rate above zero, e.g. 400000", a.ppsAllowance)
	}
	if a.burst > 0 && a.baseline > 0 && a.burst < a.baseline {
		return usagef("--burst %s is below --baseline %s", limits.FormatBps(a.burst), limits.FormatBps(a.baseline))
	}
	_, err := a.lag()
	return err
}

// options turns the flags into analyzer options for a live trace; what the
// flags leave unset stays at its default or unknown.
func (a *analysisFlags) options() (analyzer.Options, error) {
	o := analyzer.DefaultOptions()
	if err := a.check(); err != nil {
		return o, err
	}
	o.FineWindow = a.window
	o.InstanceType = a.instanceType
	o.BaselineBps, o.BurstBps = a.baseline, a.burst
	if a.flowLimit > 0 {
		o.FlowLimitBps = a.flowLimit
	}
	o.PPSAllowance = a.ppsAllowance
	lag, err := a.lag()
	o.CounterLag = lag
	return o, err
}

// counterLagName is how --counter-lag spells an analyzer.Options.CounterLag.
func counterLagName(lag time.Duration) string {
	switch lag {
	case 0:
		return "auto"
	case analyzer.NoCounterLag:
		return "0"
	}
	return lag.String()
}

// lag parses --counter-lag: 0 (auto) for "auto", analyzer.NoCounterLag for 0.
func (a *analysisFlags) lag() (time.Duration, error) {
	if a.counterLag == "auto" {
		return 0, nil
	}
	lag, err := time.ParseDuration(a.counterLag)
	if err != nil || lag < 0 || lag > maxCounterLagFlag {
		return 0, usagef("--counter-lag %q: want auto or a duration from 0 to %v (e.g. 40ms)", a.counterLag, maxCounterLagFlag)
	}
	if lag == 0 {
		return analyzer.NoCounterLag, nil
	}
	return lag, nil
}

// overRecording is the recording's own analysis with each flag given
// overriding its input; the report notes every override.
func (a *analysisFlags) overRecording(rec *record.Recording) (analyzer.Options, error) {
	if err := a.check(); err != nil {
		return analyzer.Options{}, err
	}
	o, recorded := analyzer.RecordedOptions(rec)
	if !recorded {
		// A recording of an older build: the flags over the defaults, as
		// that build did.
		return a.options()
	}
	override := func(flag, was string) {
		o.Notes = append(o.Notes, fmt.Sprintf("analyze --%s %s overrides the recorded %s", flag, a.fs.Lookup(flag).Value, was))
	}
	limit := func(v float64, src string, f func(float64) string) string {
		if v <= 0 {
			return "unknown"
		}
		return fmt.Sprintf("%s (from %s)", f(v), src)
	}
	if a.changed("instance-type") {
		override("instance-type", cmp.Or(o.InstanceType, "none"))
		o.InstanceType, o.Sources.InstanceType = a.instanceType, ""
		// Limits the table gave for the recorded type go with it.
		if strings.HasPrefix(o.Sources.Baseline, "table") {
			o.BaselineBps, o.Sources.Baseline = 0, ""
		}
		if strings.HasPrefix(o.Sources.Burst, "table") {
			o.BurstBps, o.Sources.Burst = 0, ""
		}
	}
	for _, r := range []struct {
		flag string
		v    *float64
		src  *string
		new  float64
		f    func(float64) string
	}{
		{"baseline", &o.BaselineBps, &o.Sources.Baseline, a.baseline, limits.FormatBps},
		{"burst", &o.BurstBps, &o.Sources.Burst, a.burst, limits.FormatBps},
		{"flow-limit", &o.FlowLimitBps, &o.Sources.FlowLimit, a.flowLimit, limits.FormatBps},
		{"pps-allowance", &o.PPSAllowance, &o.Sources.PPSAllowance, a.ppsAllowance, func(v float64) string { return fmt.Sprintf("%.0f pps", v) }},
	} {
		if a.changed(r.flag) {
			override(r.flag, limit(*r.v, *r.src, r.f))
			*r.v, *r.src = r.new, ""
		}
	}
	if a.changed("window") {
		override("window", o.FineWindow.String())
		o.FineWindow = a.window
	}
	if a.changed("counter-lag") {
		override("counter-lag", counterLagName(o.CounterLag))
		o.CounterLag, _ = a.lag() // checked above
	}
	if o.BurstBps > 0 && o.BaselineBps > 0 && o.BurstBps < o.BaselineBps {
		return o, usagef("burst %s is below baseline %s: give both --baseline and --burst", limits.FormatBps(o.BurstBps), limits.FormatBps(o.BaselineBps))
	}
	return o, nil
}

// outputFlags choose what is printed and saved.
type outputFlags struct {
	format string
	output string
	redact bool
}

func (o *outputFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.format, "format", "text", "report on stdout: text or json")
	fs.StringVarP(&o.output, "output", "o", "", "also write a bundle for a support ticket: a directory, or a file ending in .tar.gz")
	fs.BoolVar(&o.redact, "redact", false, "replace every address that is not link-local with a stable pseudonym, in every output")
}

func (o *outputFlags) validate() error {
	if o.format != "text" && o.format != "json" {
		return usagef("--format %q: want text or json", o.format)
	}
	return checkBundleName(o.output)
}

func durationRange(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usagef("--%s %v: must be between %v and %v", name, d, lo, hi)
	}
	return nil
}
