// Package analyzer reads a recording and says what limited the traffic:
// which EC2 allowance was exceeded, when to the fine window, by which flows,
// and what to do about it. It is pure Go and reads nothing but the
// recording: no kernel, no clock.
//
// An allowance counter only says that shaping happened between two reads,
// (previous AfterNs, this BeforeNs], and a device may show a drop some ms
// after the traffic that caused it. Counter deltas come from package
// counters (a value going down is a reset, a failed read is skipped, never a
// negative delta). The bucket series, summed into fine windows
// (Options.FineWindow, 1 ms) on a grid shared by every interface, says where:
// the traffic behind a jump is looked for over the look-back the counter's
// timing implies (incident.go, refresh.go, timing.go: Options.CounterLag, else the
// refresh period and lag learned per interface and counter from the run, up
// to MaxCounterRefresh and MaxCounterLag, 1 s each; docs/findings.md says
// how). A jump with nothing standing out after the incident before it
// counts that incident's drops, late: its look-back is the incident's drain
// stretch, whose flows other than the culprits are its victims.
//
// Jumps of one counter on one interface form one incident, one finding,
// when their traffic is at most MergeGap (10 ms) apart or the offending
// traffic stayed over the allowance in between (every fine window at the
// level the burst stood out from; for link-local traffic, never short of
// the limit by more than IncidentRefill, 250 ms of it; for conntrack, the
// gauge at 0). An incident spans its first to its last drop, carries every
// jump (Incident.Timeline), its peak PeakWindow, and is critical when it
// dropped CriticalDrops (10,000) packets or lasted CriticalDuration (1 s),
// a warning otherwise. Findings are ordered by severity, then by packets
// dropped and duration.
//
//   - microburst_in / microburst_out: for each jump of bw_in/bw_out_allowance_exceeded,
//     the span of that direction's windows carrying the most bytes above
//     SaturationShare (0.9) of the burst allowance, else of the baseline
//     (maximum-sum subarray, linear); with no allowance known or reached, above
//     the interval's own level (StandOutFactor 2 x median, at least
//     StandOutPeakShare 0.5 of the peak); jumps join into incidents as
//     above. Info near-misses: stretches of at least
//     NearMissMin (5 ms) of windows at NearMissShare (0.9) of the allowance
//     where the counter, read before and after, did not move (above the
//     allowance: a burst bucket absorbed them), one finding per interface
//     and direction, its flows from the MaxNearMisses (5) highest.
//   - pps_exceeded: the same on the packets of both directions together,
//     against Options.PPSAllowance when given (AWS does not publish it).
//   - conntrack_exceeded: from the first SYN past what the last read at the
//     conntrack_allowance_available high before the first jump said was
//     free (inbound SYNs dropped after that are never seen, so the span may
//     run to the read) to the last SYN of the incident; culprits and every
//     SYN count of the evidence are the SYN sources of one window, from
//     that read on, grouped by source address and destination, a 5-tuple's
//     second and later SYNs counted as retries (its SYN was dropped).
//     conntrack_near_limit: the gauge at or below
//     ConntrackLowShare (0.2) of its highest value, or fallen by
//     ConntrackFallShare (0.5) of it within ConntrackFallWindow (10 s), with
//     no exceeded finding overlapping; the window is the SYN span of the fall.
//   - linklocal_exceeded: the span of link-local packets (DNS, IMDS, NTP
//     together) above LinkLocalPPS (1024/s) per window, counted in the
//     direction the interface sees requests to the services (egress on ENA,
//     ingress on a container's veth). linklocal_hot: a
//     1 s rate at LinkLocalHotShare (0.7) of the limit with no exceeded
//     finding, placed as the span above half that rate; the stretches of
//     one interface are one finding. Both carry the link-local detail when
//     the datapath copied payloads (linklocal_detail.go): what each client
//     asked, and the fixes ranked, the first leading the recommendation.
//   - flow_at_cap: a flow's rate per PlateauBin (1 s; the median of its drain
//     intervals', so a TCP flow's dips after a loss at the cap do not hide
//     it) flat (coefficient of variation <= PlateauCV 0.05) for PlateauMin
//     (3 s) within FlowCapBand
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
//   - imds_hop_limit: from the IMDS events, per client (owner group, else
//     source address): a token request whose reply (the first on its
//     connection after it) arrived with TTL 1, the client behind a
//     forwarding hop (a time exceeded toward IMDS quoting that connection's
//     reply, or an owner found by its veth), and a later token request or
//     token-less GET of the client (imds.go).
//
// Culprit flows are those that moved traffic inside the finding's window:
// from window events when they explain EventCoverage (0.5) of it, else from
// flow snapshot deltas overlapping it (FlowShare.Source says which). The
// whole analysis is linear in the buckets, apart from a sort of the windows
// of each sample interval where a counter moved.
package analyzer
