package analyzer

import (
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Inputs are what to record of an analysis so that analyzing the recording
// again reproduces it: the limits it resolved, each with its source, the
// instance type and the fine window.
func Inputs(res *Result, opt Options) *record.AnalysisInputs {
	l := res.Trace.Limits
	lim := func(x Limit) record.Limit {
		if !x.Known {
			return record.Limit{}
		}
		return record.Limit{Value: x.Value, Source: x.Source}
	}
	in := &record.AnalysisInputs{
		InstanceType: res.Trace.InstanceType, InstanceTypeSource: opt.Sources.InstanceType,
		BaselineBps: lim(l.BaselineBps), BurstBps: lim(l.BurstBps), FlowLimitBps: lim(l.FlowLimitBps),
		LinkLocalPPS: lim(l.LinkLocalPPS), PPSAllowance: lim(l.PPSAllowance),
		FineWindowNs: res.Trace.FineWindowUs * 1000,
		CounterLagNs: int64(opt.CounterLag), CounterRefreshNs: int64(opt.CounterRefresh),
	}
	if in.InstanceType != "" && in.InstanceTypeSource == "" && opt.InstanceType != "" {
		in.InstanceTypeSource = limitFromOptions
	}
	return in
}

// RecordedOptions are the options of the recording's own analysis, each
// limit with the source it had. ok is false for a recording of a build that
// did not keep them: DefaultOptions then, and the recorded instance type and
// flow limit apply as they always did.
func RecordedOptions(rec *record.Recording) (opt Options, ok bool) {
	opt = DefaultOptions()
	in := rec.Meta.Analysis
	if in == nil {
		return opt, false
	}
	opt.InstanceType = in.InstanceType
	opt.Sources.InstanceType = in.InstanceTypeSource
	set := func(v *float64, src *string, l record.Limit) {
		if l.Value > 0 {
			*v, *src = l.Value, l.Source
		}
	}
	set(&opt.BaselineBps, &opt.Sources.Baseline, in.BaselineBps)
	set(&opt.BurstBps, &opt.Sources.Burst, in.BurstBps)
	set(&opt.FlowLimitBps, &opt.Sources.FlowLimit, in.FlowLimitBps)
	set(&opt.LinkLocalPPS, &opt.Sources.LinkLocal, in.LinkLocalPPS)
	set(&opt.PPSAllowance, &opt.Sources.PPSAllowance, in.PPSAllowance)
	if in.FlowLimitBps.Value == 0 {
		opt.FlowLimitBps = 0
		opt.Sources.FlowLimit = limitUnknown
	}
	if in.FineWindowNs > 0 {
		opt.FineWindow = time.Duration(in.FineWindowNs)
	}
	opt.CounterLag = time.Duration(in.CounterLagNs)
	opt.CounterRefresh = time.Duration(in.CounterRefreshNs)
	return opt, true
}
