package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
	"github.com/enaprobe/enaprobe/internal/upload"
	"github.com/enaprobe/enaprobe/loader"
)

// rateValue is a flag in bits per second written with units: 40Mbit, 5Gbit,
// 1.5Gbps, 10MB/s (bytes).
type rateValue struct{ bps *float64 }

func (r rateValue) String() string {
	if r.bps == nil || *r.bps == 0 {
		return ""
	}
	return units.BitRate(*r.bps)
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

// bytesValue is a flag in bytes written with a unit: 360kB, 3.6MB, 1MiB
// (decimal or binary prefixes), or a bare number of bytes.
type bytesValue struct{ n *uint32 }

func (b bytesValue) String() string {
	if b.n == nil || *b.n == 0 {
		return ""
	}
	return formatBytesFlag(uint64(*b.n))
}

func (b bytesValue) Set(s string) error {
	in := strings.TrimSpace(s)
	num := strings.TrimRight(in, "KkMmGgiB")
	unit := in[len(num):]
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return fmt.Errorf("%q: want a size above zero with its unit, e.g. 360kB, 3.6MB or 1MiB", s)
	}
	mult, ok := map[string]float64{"": 1, "B": 1, "kB": 1e3, "KB": 1e3, "KiB": 1 << 10, "MB": 1e6, "MiB": 1 << 20, "GB": 1e9, "GiB": 1 << 30}[unit]
	if !ok {
		return fmt.Errorf("%q: unknown unit %q (want B, kB, KiB, MB, MiB), e.g. 360kB or 1MiB", s, unit)
	}
	if v*mult > math.MaxUint32 {
		return fmt.Errorf("%q: at most 4GiB", s)
	}
	*b.n = uint32(math.Round(v * mult))
	return nil
}

func (bytesValue) Type() string { return "size" }

// formatBytesFlag writes a size as a flag takes it, exactly: 1MiB, 360kB,
// 1234B.
func formatBytesFlag(n uint64) string {
	for _, u := range []struct {
		name string
		size uint64
	}{{"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"kB", 1e3}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatUint(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}

// formatRateFlag writes a rate as a flag takes it, exactly: 40Mbit,
// 2500kbit, 1234bit.
func formatRateFlag(bps uint64) string {
	for _, u := range []struct {
		name string
		size uint64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"kbit", 1e3}} {
		if bps >= u.size && bps%u.size == 0 {
			return strconv.FormatUint(bps/u.size, 10) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

// maxCounterLagFlag bounds --counter-lag: a counter later than this by
// seconds says nothing about which traffic moved it.
const maxCounterLagFlag = 10 * time.Second

// analysisFlags are the limits and thresholds both trace and analyze take.
type analysisFlags struct {
	fs             *pflag.FlagSet
	instanceType   string
	baseline       float64
	burst          float64
	flowLimit      float64
	ppsAllowance   float64
	window         time.Duration
	counterLag     string
	counterRefresh string
}

func (a *analysisFlags) register(fs *pflag.FlagSet) {
	a.fs = fs
	fs.StringVar(&a.instanceType, "instance-type", "", "EC2 instance type whose bandwidth allowance to compare with, e.g. c6i.xlarge (default: from IMDS on EC2, or the recording)")
	fs.Var(rateValue{&a.baseline}, "baseline", "aggregate baseline bandwidth per direction, a rate with its unit, e.g. 12.5Gbit (default: the instance table)")
	fs.Var(rateValue{&a.burst}, "burst", "aggregate burst bandwidth per direction, a rate with its unit, e.g. 25Gbit (default: the instance table)")
	fs.Var(rateValue{&a.flowLimit}, "flow-limit", "per-flow (5-tuple) cap, a rate with its unit, e.g. 5Gbit (default 5Gbit; 10Gbit in a cluster placement group, 25Gbit with ENA Express, when discovered)")
	fs.Float64Var(&a.ppsAllowance, "pps-allowance", 0, "instance allowance in packets/s, both directions, e.g. 400000, if you know it (AWS does not publish it)")
	registerWindow(fs, &a.window)
	fs.StringVar(&a.counterLag, "counter-lag", "auto", "how long after the traffic the allowance counters show a drop: auto (learned per counter from the run, at most 1s), or a duration from 0 to 10s, e.g. 40ms (0: only between the two reads around a jump)")
	fs.StringVar(&a.counterRefresh, "counter-refresh", "auto", "how often the device refreshes the allowance counters a read returns: auto (learned per counter from the run's changes), or a duration from 0 to 1s a longer run reported, e.g. 100ms (0: every change at the next read)")
}

func (a *analysisFlags) changed(name string) bool { return a.fs != nil && a.fs.Changed(name) }

// check refuses values that mean nothing.
func (a *analysisFlags) check() error {
	if a.window <= 0 {
		return knobUsage(&loader.WindowError{Window: a.window})
	}
	if a.changed("pps-allowance") && !(a.ppsAllowance > 0) {
		return usagef("--pps-allowance %v: must be a packet rate above zero, e.g. 400000", a.ppsAllowance)
	}
	if a.burst > 0 && a.baseline > 0 && a.burst < a.baseline {
		return usagef("--burst %s is below --baseline %s", units.BitRate(a.burst), units.BitRate(a.baseline))
	}
	if _, err := a.refresh(); err != nil {
		return err
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
	o.CounterRefresh, _ = a.refresh() // checked above
	lag, err := a.lag()
	o.CounterLag = lag
	return o, err
}

// refresh parses --counter-refresh: 0 (auto) for "auto",
// analyzer.RefreshEveryRead for 0.
func (a *analysisFlags) refresh() (time.Duration, error) {
	return autoDuration("counter-refresh", a.counterRefresh, analyzer.MaxCounterRefresh, analyzer.RefreshEveryRead, "100ms")
}

// lag parses --counter-lag: 0 (auto) for "auto", analyzer.NoCounterLag for 0.
func (a *analysisFlags) lag() (time.Duration, error) {
	return autoDuration("counter-lag", a.counterLag, maxCounterLagFlag, analyzer.NoCounterLag, "40ms")
}

// autoDuration parses a flag that takes auto or a duration from 0 to most:
// auto is 0 and 0 is zero, the option's own word for it.
func autoDuration(flag, v string, most, zero time.Duration, example string) (time.Duration, error) {
	if v == "auto" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > most {
		return 0, usagef("--%s %q: want auto or a duration from 0 to %v (e.g. %s)", flag, v, most, example)
	}
	if d == 0 {
		return zero, nil
	}
	return d, nil
}

// autoDurationName is how such a flag spells its option's value.
func autoDurationName(d, zero time.Duration) string {
	switch d {
	case 0:
		return "auto"
	case zero:
		return "0"
	}
	return d.String()
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
	// was is "" when the recording had no value: then the flag sets one.
	override := func(flag, was string) {
		if was == "" {
			o.Notes = append(o.Notes, fmt.Sprintf("analyze --%s %s sets what the recording did not have", flag, a.fs.Lookup(flag).Value))
			return
		}
		o.Notes = append(o.Notes, fmt.Sprintf("analyze --%s %s overrides the recorded %s", flag, a.fs.Lookup(flag).Value, was))
	}
	limit := func(v float64, src string, f func(float64) string) string {
		if v <= 0 {
			return ""
		}
		return fmt.Sprintf("%s (from %s)", f(v), src)
	}
	if a.changed("instance-type") {
		override("instance-type", o.InstanceType)
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
		{"baseline", &o.BaselineBps, &o.Sources.Baseline, a.baseline, units.BitRate},
		{"burst", &o.BurstBps, &o.Sources.Burst, a.burst, units.BitRate},
		{"flow-limit", &o.FlowLimitBps, &o.Sources.FlowLimit, a.flowLimit, units.BitRate},
		{"pps-allowance", &o.PPSAllowance, &o.Sources.PPSAllowance, a.ppsAllowance, units.PacketRate},
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
		override("counter-lag", autoDurationName(o.CounterLag, analyzer.NoCounterLag))
		o.CounterLag, _ = a.lag() // checked above
	}
	if a.changed("counter-refresh") {
		override("counter-refresh", autoDurationName(o.CounterRefresh, analyzer.RefreshEveryRead))
		o.CounterRefresh, _ = a.refresh() // checked above
	}
	if o.BurstBps > 0 && o.BaselineBps > 0 && o.BurstBps < o.BaselineBps {
		return o, usagef("burst %s is below baseline %s: give both --baseline and --burst", units.BitRate(o.BurstBps), units.BitRate(o.BaselineBps))
	}
	return o, nil
}

// outputFlags choose what is printed and saved.
type outputFlags struct {
	format string
	output string
	redact bool
	upload uploadFlags // for -o s3://...
}

func (o *outputFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.format, "format", "text", "report on stdout: text or json")
	fs.StringVarP(&o.output, "output", "o", "", "also write a bundle for a support ticket: a directory, a file ending in .tar.gz, or s3://BUCKET/PREFIX (uploaded with the AWS SDK's default credentials)")
	fs.BoolVar(&o.redact, "redact", false, "replace every address that is not link-local with a stable pseudonym, in every output")
	o.upload.register(fs)
}

func (o *outputFlags) validate() error {
	if o.format != "text" && o.format != "json" {
		return usagef("--format %q: want text or json", o.format)
	}
	if isUpload(o.output) {
		_, err := upload.ParseURL(o.output)
		if err != nil {
			return usageError{err}
		}
		return nil
	}
	return checkBundleName(o.output)
}

// registerWindow registers --window, which trace, serve, analyze and lab
// run take.
func registerWindow(fs *pflag.FlagSet, window *time.Duration) {
	fs.DurationVar(window, "window", loader.DefaultWindow, fmt.Sprintf("fine window that findings are located with, a duration, e.g. %v (rounded up to whole buckets)", loader.DefaultWindow))
}

// captureFlags are the datapath's knobs trace, serve and lab run take:
// one registration, one check.
type captureFlags struct {
	bucket         time.Duration
	sampleInterval time.Duration
	attach         string
	readyFile      string
}

// register registers the flags with sampleInterval, the command's own
// default read interval, and sampleNote, what a read costs there.
func (c *captureFlags) register(fs *pflag.FlagSet, sampleInterval time.Duration, sampleNote string) {
	fs.DurationVar(&c.bucket, "bucket", loader.DefaultBucket, fmt.Sprintf("time bucket width, a duration from %v to %v, e.g. %v (a bucket above the window raises the window with it)",
		loader.MinBucket, loader.MaxBucket, loader.DefaultBucket))
	fs.DurationVar(&c.sampleInterval, "sample-interval", sampleInterval, fmt.Sprintf("ENA counter sample interval, a duration of %v or more, e.g. %v (%s)", ena.MinInterval, sampleInterval, sampleNote))
	fs.StringVar(&c.attach, "attach", "auto", "how to hook into tc: auto, tcx (Linux 6.6+) or tc (clsact + cls_bpf)")
	fs.StringVar(&c.readyFile, "ready-file", "", "write this file once the programs are attached (for scripts and tests)")
	_ = fs.MarkHidden("ready-file")
}

// check refuses a knob that means nothing and returns how to attach.
func (c *captureFlags) check() (mode loader.AttachMode, err error) {
	if _, err := loader.CheckKnobs(c.bucket, loader.DefaultWindow); err != nil {
		return mode, knobUsage(err)
	}
	if c.sampleInterval < ena.MinInterval {
		return mode, usagef("--sample-interval %v: at least %v", c.sampleInterval, ena.MinInterval)
	}
	if mode, err = loader.ParseAttachMode(c.attach); err != nil {
		return mode, usageError{err}
	}
	return mode, nil
}

// fineWindow is the window the datapath's rule (loader.CheckKnobs) makes of
// --window and --bucket; it says so when it raises the window.
func (c *captureFlags) fineWindow(window time.Duration, log zerolog.Logger) (time.Duration, error) {
	w, err := loader.CheckKnobs(c.bucket, window)
	if err != nil {
		return 0, knobUsage(err)
	}
	sayRaised(log, window, w, c.bucket, "")
	return w, nil
}

// sayRaised logs that the datapath's window rule raised the fine window
// asked for to got, whole buckets of bucket (whose: of what, if not of
// --bucket).
func sayRaised(log zerolog.Logger, asked, got, bucket time.Duration, whose string) {
	if got != asked {
		log.Info().Dur("window", got).Msgf("--window %v: raised to %v, a whole number of %s%v buckets", asked, got, whose, bucket)
	}
}

// ready writes the ready file, if asked for, with what it is to hold.
func (c *captureFlags) ready(content string, log zerolog.Logger) {
	if c.readyFile == "" {
		return
	}
	if err := os.WriteFile(c.readyFile, []byte(content+"\n"), 0o644); err != nil {
		log.Warn().Err(err).Msg("write ready file")
	}
}

// knobUsage turns the loader's errors of the datapath's knobs into usage
// errors that name the flag and a value that works.
func knobUsage(err error) error {
	var be *loader.BucketError
	var we *loader.WindowError
	switch {
	case errors.As(err, &be):
		return usagef("--bucket %v: must be between %v and %v, e.g. %v", be.Bucket, loader.MinBucket, loader.MaxBucket, loader.DefaultBucket)
	case errors.As(err, &we):
		return usagef("--window %v: must be positive, e.g. %v", we.Window, loader.DefaultWindow)
	}
	return err
}

func durationRange(name string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usagef("--%s %v: must be between %v and %v", name, d, lo, hi)
	}
	return nil
}
