package analyzer

// instanceBandwidth is an aggregate allowance per direction, in bits/s.
// burst is 0 for sizes sold as "N Gigabit" (no burst: the baseline holds).
type instanceBandwidth struct{ baseline, burst float64 }

// instanceTable holds the examples of /work/shared/AWS-LIMITS.md (EC2 User
// Guide, "Amazon EC2 instance network bandwidth", as of 2025). It is a
// fallback only: the authoritative values are DescribeInstanceTypes
// NetworkInfo.NetworkCards[].BaselineBandwidthInGbps and PeakBandwidthInGbps,
// which Options.BaselineBps and BurstBps override it with.
var instanceTable = map[string]instanceBandwidth{
	"c5.large":    {0.75e9, 10e9},
	"m5.large":    {0.75e9, 10e9},
	"t3.micro":    {0.064e9, 5e9},
	"c6i.large":   {0.781e9, 12.5e9},
	"c7g.large":   {0.937e9, 12.5e9},
	"m7i.large":   {0.781e9, 12.5e9},
	"m5.8xlarge":  {10e9, 0},
	"c5.24xlarge": {25e9, 0},
}

// Limit sources (Limit.Source).
const (
	limitFromOptions   = "options"
	limitFromRecording = "recording"
	limitFromDefault   = "default"
	limitFromTable     = "table: AWS-LIMITS.md examples (EC2 User Guide, network bandwidth)"
	limitNoBurst       = "table: no burst for this size, the baseline holds"
	limitUnknown       = "unknown"
)

func known(v float64, source string) Limit {
	if v <= 0 {
		return Limit{Source: limitUnknown}
	}
	return Limit{Value: v, Known: true, Source: source}
}

// resolveLimits picks each limit from the options, the recording or the
// shipped table, and says which.
func resolveLimits(opt Options, instanceType string, recordedFlowLimit float64) Limits {
	var l Limits
	l.BaselineBps = known(opt.BaselineBps, limitFromOptions)
	l.BurstBps = known(opt.BurstBps, limitFromOptions)
	if row, ok := instanceTable[instanceType]; ok {
		if !l.BaselineBps.Known {
			l.BaselineBps = known(row.baseline, limitFromTable)
		}
		if !l.BurstBps.Known {
			if row.burst > 0 {
				l.BurstBps = known(row.burst, limitFromTable)
			} else {
				l.BurstBps = known(l.BaselineBps.Value, limitNoBurst)
			}
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
