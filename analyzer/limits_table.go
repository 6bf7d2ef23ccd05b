package analyzer

import (
	"cmp"
	"strings"

	"github.com/enaprobe/enaprobe/internal/limits"
)

// Limit sources (Limit.Source).
const (
	limitFromOptions   = "options"
	limitFromRecording = "recording"
	limitFromDefault   = "default"
	limitUnknown       = "unknown"
)

// tableSource names the embedded instance table (package limits) by the
// first line of its provenance and the line saying when it was taken.
func tableSource(burstable bool) string {
	lines := strings.Split(limits.Provenance(), "\n")
	src := "table (package limits): " + lines[0]
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "Taken:") {
			src += " " + strings.SplitN(l, ",", 2)[0]
		}
	}
	if !burstable {
		src += " (no burst for this size: the baseline holds)"
	}
	return src
}

func known(v float64, source string) Limit {
	if v <= 0 {
		return Limit{Source: limitUnknown}
	}
	return Limit{Value: v, Known: true, Source: source}
}

// resolveLimits picks each limit from the options, the recording or the
// embedded instance table (package limits), and says which.
func resolveLimits(opt Options, instanceType string, recordedFlowLimit float64) Limits {
	src := func(s string) string { return cmp.Or(s, limitFromOptions) }
	var l Limits
	l.BaselineBps = known(opt.BaselineBps, src(opt.Sources.Baseline))
	l.BurstBps = known(opt.BurstBps, src(opt.Sources.Burst))
	l.PPSAllowance = known(opt.PPSAllowance, src(opt.Sources.PPSAllowance))
	if it, ok := limits.Lookup(instanceType); ok {
		typeSource := ""
		if opt.Sources.InstanceType != "" {
			typeSource = "; " + instanceType + " from " + opt.Sources.InstanceType
		}
		if !l.BaselineBps.Known {
			l.BaselineBps = known(it.BaselineGbps*1e9, tableSource(true)+typeSource)
		}
		if !l.BurstBps.Known {
			l.BurstBps = known(it.PeakGbps*1e9, tableSource(it.Burstable)+typeSource)
		}
	}
	def := DefaultOptions()
	switch {
	case opt.Sources.FlowLimit != "":
		l.FlowLimitBps = known(opt.FlowLimitBps, opt.Sources.FlowLimit)
	case recordedFlowLimit > 0 && opt.FlowLimitBps == def.FlowLimitBps:
		l.FlowLimitBps = known(recordedFlowLimit, limitFromRecording)
	case opt.FlowLimitBps == def.FlowLimitBps:
		l.FlowLimitBps = known(opt.FlowLimitBps, limitFromDefault)
	default:
		l.FlowLimitBps = known(opt.FlowLimitBps, limitFromOptions)
	}
	switch {
	case opt.Sources.LinkLocal != "":
		l.LinkLocalPPS = known(opt.LinkLocalPPS, opt.Sources.LinkLocal)
	case opt.LinkLocalPPS == def.LinkLocalPPS:
		l.LinkLocalPPS = known(opt.LinkLocalPPS, limitFromDefault)
	default:
		l.LinkLocalPPS = known(opt.LinkLocalPPS, limitFromOptions)
	}
	return l
}
