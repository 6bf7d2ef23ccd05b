package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/limits"
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
	*r.bps = v
	return nil
}

func (rateValue) Type() string { return "rate" }

// maxCounterLagFlag bounds --counter-lag: a counter later than this by
// seconds says nothing about which traffic moved it.
const maxCounterLagFlag = 10 * time.Second

// analysisFlags are the limits and thresholds both trace and analyze take.
type analysisFlags struct {
	instanceType string
	baseline     float64
	burst        float64
	flowLimit    float64
	ppsAllowance float64
	window       time.Duration
	counterLag   string
}

func (a *analysisFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.instanceType, "instance-type", "", "EC2 instance type whose bandwidth allowance to compare with (default: from IMDS on EC2, or the recording)")
	fs.Var(rateValue{&a.baseline}, "baseline", "aggregate baseline bandwidth per direction, overriding the instance table (e.g. 12.5Gbit)")
	fs.Var(rateValue{&a.burst}, "burst", "aggregate burst bandwidth per direction, overriding the instance table")
	fs.Var(rateValue{&a.flowLimit}, "flow-limit", "per-flow (5-tuple) cap (default 5Gbit; 10Gbit in a cluster placement group, 25Gbit with ENA Express, when discovered)")
	fs.Float64Var(&a.ppsAllowance, "pps-allowance", 0, "instance packets/s allowance, if you know it (AWS does not publish it)")
	fs.DurationVar(&a.window, "window", time.Millisecond, "fine window that findings are located with (1ms; at least the bucket)")
	fs.StringVar(&a.counterLag, "counter-lag", "auto", "how long after the traffic the allowance counters show a drop: auto (estimated per counter, at most 100ms), or a duration such as 40ms (0: none)")
}

// options turns the flags into analyzer options; the recording fills what
// the flags leave unset.
func (a *analysisFlags) options() (analyzer.Options, error) {
	o := analyzer.DefaultOptions()
	if a.window <= 0 {
		return o, usagef("--window %v: must be positive", a.window)
	}
	o.FineWindow = a.window
	o.InstanceType = a.instanceType
	o.BaselineBps, o.BurstBps = a.baseline, a.burst
	if a.flowLimit > 0 {
		o.FlowLimitBps = a.flowLimit
	}
	o.PPSAllowance = a.ppsAllowance
	if a.counterLag != "auto" {
		lag, err := time.ParseDuration(a.counterLag)
		if err != nil || lag < 0 || lag > maxCounterLagFlag {
			return o, usagef("--counter-lag %q: want auto or a duration from 0 to %v (e.g. 40ms)", a.counterLag, maxCounterLagFlag)
		}
		o.CounterLag = lag
		if lag == 0 {
			o.CounterLag = analyzer.NoCounterLag
		}
	}
	if a.burst > 0 && a.baseline > 0 && a.burst < a.baseline {
		return o, usagef("--burst %s is below --baseline %s", limits.FormatBps(a.burst), limits.FormatBps(a.baseline))
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
	return nil
}

func durationRange(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usagef("--%s %v: must be between %v and %v", name, d, lo, hi)
	}
	return nil
}
