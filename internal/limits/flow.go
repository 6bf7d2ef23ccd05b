package limits

import (
	"fmt"
	"math"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/units"
)

// Per-flow caps from AWS-LIMITS.md. A flow is one 5-tuple; hitting the cap
// moves no ENA counter, so these numbers are the only way to name it.
const (
	// FlowDefaultBps applies outside a cluster placement group.
	FlowDefaultBps = 5e9
	// FlowPlacementGroupBps applies between instances of the same cluster
	// placement group.
	FlowPlacementGroupBps = 10e9
	// FlowENAExpressBps applies with ENA Express between eligible instances
	// (same Availability Zone in current docs, same subnet in 2023 docs).
	FlowENAExpressBps = 25e9
)

// FlowCap is the single-flow cap that applies to an instance: its rate,
// why (what was assumed), and where it came from, for the report.
type FlowCap struct {
	Bps    float64
	Reason string
	Source string // "options", "ethtool: ...", "IMDS: ...", "default"
}

// FlowLimit returns the single-flow cap that applies to this instance. An
// override > 0 wins; then ENA Express when ena_srd_mode has its enabled bit
// set; then a placement group; then the 5 Gbps default. srdModeKnown is
// false when the driver does not expose ena_srd_mode.
//
// The group name alone cannot tell a cluster placement group from a spread
// or partition one, and the cap also depends on where the peer is, so the
// reason always says what was assumed.
func FlowLimit(placementGroup string, srdMode uint64, srdModeKnown bool, override float64) FlowCap {
	if override > 0 && !math.IsInf(override, 0) {
		return FlowCap{override, fmt.Sprintf("per-flow limit %s set by the user", units.BitRate(override)), "options"}
	}
	if srdModeKnown && srdMode&counters.SRDModeEnabled != 0 {
		return FlowCap{FlowENAExpressBps, fmt.Sprintf("ENA Express enabled (ena_srd_mode=%#x): up to 25 Gbps per flow, "+
			"only toward ENA Express peers in the same Availability Zone; other flows keep the 5 or 10 Gbps cap", srdMode),
			"ethtool: ENA Express enabled (ena_srd_mode)"}
	}
	unknownSRD := ""
	if !srdModeKnown {
		unknownSRD = "; ENA Express state unknown (no ena_srd_mode counter)"
	}
	if placementGroup != "" {
		return FlowCap{FlowPlacementGroupBps, fmt.Sprintf("instance is in placement group %q: up to 10 Gbps per flow if it is a "+
			"cluster placement group and the peer is in the same group; IMDS does not say the strategy, and "+
			"flows leaving the group keep the 5 Gbps cap%s", placementGroup, unknownSRD),
			"IMDS: placement group " + placementGroup}
	}
	return FlowCap{FlowDefaultBps, "not in a placement group: 5 Gbps per flow" + unknownSRD, "default"}
}

// GatewayLimitBps is the aggregate cap for traffic through an internet
// gateway or to another Region: 5 Gbps below 32 vCPUs, otherwise half the
// instance bandwidth or 5 Gbps, whichever is larger. vcpus <= 0 means
// unknown and is treated as below 32, the smaller cap.
func GatewayLimitBps(vcpus int, instanceBps float64) (bps float64, reason string) {
	switch {
	case vcpus <= 0:
		return FlowDefaultBps, "internet gateway / inter-Region: vCPU count unknown, assuming fewer than 32: 5 Gbps"
	case vcpus < 32:
		return FlowDefaultBps, fmt.Sprintf("internet gateway / inter-Region: %d vCPUs < 32: 5 Gbps", vcpus)
	}
	half := instanceBps / 2
	if !(half > FlowDefaultBps) {
		return FlowDefaultBps, fmt.Sprintf("internet gateway / inter-Region: %d vCPUs, 50%% of %s is at most 5 Gbps: 5 Gbps",
			vcpus, units.BitRate(instanceBps))
	}
	return half, fmt.Sprintf("internet gateway / inter-Region: %d vCPUs: 50%% of %s", vcpus, units.BitRate(instanceBps))
}
