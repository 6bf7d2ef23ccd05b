// Package counters knows the names of the ENA statistics and turns a series
// of counter samples into what happened between them: jumps, resets, failed
// reads and gauge values. It is pure Go (no kernel dependency) so the
// analyzer and the report renderers can use it on any platform.
package counters

// The ENA statistics enaprobe reads by name (AWS-LIMITS.md). Older drivers
// lack some of them: a name missing from a read is absent, never zero.
const (
	// The five allowance counters, since ENA 2.2.10.
	BwInAllowanceExceeded      = "bw_in_allowance_exceeded"
	BwOutAllowanceExceeded     = "bw_out_allowance_exceeded"
	PPSAllowanceExceeded       = "pps_allowance_exceeded"
	ConntrackAllowanceExceeded = "conntrack_allowance_exceeded"
	LinklocalAllowanceExceeded = "linklocal_allowance_exceeded"

	// ConntrackAllowanceAvailable is a gauge, since ENA 2.8.1.
	ConntrackAllowanceAvailable = "conntrack_allowance_available"

	// ENA Express (SRD), since ENA 2.8.0 and only where the device supports
	// it. SRDMode and SRDResourceUtilization are gauges.
	SRDMode                = "ena_srd_mode"
	SRDTxPkts              = "ena_srd_tx_pkts"
	SRDEligibleTxPkts      = "ena_srd_eligible_tx_pkts"
	SRDRxPkts              = "ena_srd_rx_pkts"
	SRDResourceUtilization = "ena_srd_resource_utilization"

	// TotalResets counts driver resets, since ENA 2.10.0.
	TotalResets = "total_resets"
)

// Bits of the SRDMode bitmap.
const (
	SRDModeEnabled           = 1 << 0
	SRDModeUDPEnabled        = 1 << 1
	SRDModeUDPOrderingBypass = 1 << 2
)

// AllowanceExceeded lists the five *_allowance_exceeded counters.
var AllowanceExceeded = []string{
	BwInAllowanceExceeded,
	BwOutAllowanceExceeded,
	PPSAllowanceExceeded,
	ConntrackAllowanceExceeded,
	LinklocalAllowanceExceeded,
}

// DeviceCounters are the statistics the driver fetches from the device with
// an admin command at every read. When that command fails the driver still
// reports them, as zeros, which is why an all-zero read of these names is
// taken for a failed read.
var DeviceCounters = []string{
	BwInAllowanceExceeded,
	BwOutAllowanceExceeded,
	PPSAllowanceExceeded,
	ConntrackAllowanceExceeded,
	LinklocalAllowanceExceeded,
	ConntrackAllowanceAvailable,
	SRDMode,
	SRDTxPkts,
	SRDEligibleTxPkts,
	SRDRxPkts,
	SRDResourceUtilization,
}

// ENACounters are all the names above: the ones a recent ENA driver on an
// SRD-capable device reports.
var ENACounters = append(append([]string(nil), DeviceCounters...), TotalResets)

// IsGauge tells whether a statistic is a level read as is (true) or a
// cumulative count whose deltas matter (false). Names it does not know are
// cumulative, as almost every ethtool statistic is.
func IsGauge(name string) bool {
	switch name {
	case ConntrackAllowanceAvailable, SRDMode, SRDResourceUtilization:
		return true
	}
	return false
}
