// Package analyzer reads a recording and says what limited the traffic:
// which EC2 allowance was exceeded, when to the fine window, by which flows,
// and what to do about it. It is pure Go and reads nothing but the
// recording: no kernel, no clock.
//
// An allowance counter only says that shaping happened between two reads,
// (previous AfterNs, this BeforeNs]. Counter deltas come from package
// counters (a value going down is a reset, a failed read is skipped, never a
// negative delta). The bucket series, summed into fine windows
// (Options.FineWindow, 1 ms) on a grid shared by every interface, says where
// in that interval:
//
//   - microburst_in / microburst_out: for each jump of bw_in/bw_out_allowance_exceeded,
//     the span of that direction's windows carrying the most bytes above
//     SaturationShare (0.9) of the burst allowance, else of the baseline
//     (maximum-sum subarray, linear); with no allowance known or reached, above
//     the interval's own level (StandOutFactor 2 x median, at least
//     StandOutPeakShare 0.5 of the peak). Jumps of consecutive reads whose spans
//     are at most MergeGap (10 ms) apart are one burst. Info near-misses: windows
//     at NearMissShare (0.9) of the allowance where the counter was read before
//     and after and did not move (MaxNearMisses 5 highest per direction).
//   - pps_exceeded: the same on the packets of both directions together,
//     against Options.PPSAllowance when given (AWS does not publish it).
//   - conntrack_exceeded: the SYN span of the jump interval, started where the
//     SYNs since the previous read exceeded what conntrack_allowance_available
//     said was left (inbound SYNs dropped after that are never seen, so the
//     span may run to the read); culprits are the SYN sources from the read
//     before, grouped by source address and destination. conntrack_near_limit: the gauge at or below
//     ConntrackLowShare (0.2) of its highest value, or fallen by
//     ConntrackFallShare (0.5) of it within ConntrackFallWindow (10 s), with
//     no exceeded finding overlapping; the window is the SYN span of the fall.
//   - linklocal_exceeded: the span of link-local packets (DNS, IMDS, NTP
//     together) above LinkLocalPPS (1024/s) per window, counted in the
//     direction the interface sees requests to the services (egress on ENA,
//     ingress on a container's veth). linklocal_hot: a
//     1 s rate at LinkLocalHotShare (0.7) of the limit with no exceeded
//     finding, placed as the span above half that rate.
//   - flow_at_cap: a flow's throughput per PlateauBin (1 s) flat (coefficient of
//     variation <= PlateauCV 0.05) for PlateauMin (3 s) within FlowCapBand
//     (10%) of FlowLimitBps, with no bw or pps jump meanwhile; ends refined by
//     the flow's window events. With the limit unknown, a flat plateau at the
//     flow's own maximum of at least FlowPlateauMinBps (1 Gbps) is info.
//   - baseline_exhausted: in BaselineBin (1 s) bins of the ENA interfaces'
//     aggregate, a rate at BaselineAboveFactor (1.5) x baseline followed
//     within a bin by PlateauMin within BaselineBand (15%) of the baseline
//     while the bw counter rose; the fall is placed by a change point.
//     Microburst jumps inside it are explained by it and not reported.
//   - jumbo_leaving_vpc (info): an egress flow that sent packets over 1500
//     bytes toward an IPv4 address outside the ranges a VPC uses (RFC 1918,
//     100.64.0.0/10, 198.18.0.0/15): leaving the VPC the MTU is 1500.
//
// Culprit flows are those that moved traffic inside the finding's window:
// from window events when they explain EventCoverage (0.5) of it, else from
// flow snapshot deltas overlapping it (FlowShare.Source says which). The
// whole analysis is linear in the buckets, apart from a sort of the windows
// of each sample interval where a counter moved.
package analyzer
