package analyzer

import (
	"strings"

	"github.com/enaprobe/enaprobe/limits"
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
	var l Limits
	l.BaselineBps = known(opt.BaselineBps, limitFromOptions)
	l.BurstBps = known(opt.BurstBps, limitFromOptions)
	if it, ok := limits.Lookup(instanceType); ok {
		if !l.BaselineBps.Known {
			l.BaselineBps = known(it.BaselineGbps*1e9, tableSource(true))
		}
		if !l.BurstBps.Known {
			l.BurstBps = known(it.PeakGbps*1e9, tableSource(it.Burstable))
		}
	}
	def := DefaultOptions()
	switch {
	case recordedFlowLimit > 0 && opt.FlowLimitBps == def.FlowLimitBps:
		l.FlowLimitBps = known(recordedFlowLimit, limitFromRecording)
	case opt.FlowLimitBps == def.FlowLimitBps:
		l.FlowLimitBps = known(opt.FlowLimitBps, limitFromDefault)
	default:
		l.FlowLimitBps = known(opt.FlowLimitBps, limitFromOptions)
	}
	if opt.LinkLocalPPS == def.LinkLocalPPS {
		l.LinkLocalPPS = known(opt.LinkLocalPPS, limitFromDefault)
	} else {
		l.LinkLocalPPS = known(opt.LinkLocalPPS, limitFromOptions)
	}
	return l
}
