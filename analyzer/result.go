package analyzer

import (
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// SchemaVersion is the version of the Result JSON. Bump the major part when a
// field changes meaning or disappears; adding a field is a minor change.
const SchemaVersion = "1.9"

// Result is everything the analysis says about one recording. It is the JSON
// report: renderers and the JSON Schema are built from these types.
type Result struct {
	SchemaVersion string         `json:"schema_version"`
	Trace         TraceInfo      `json:"trace"`
	Totals        []Total        `json:"totals"`
	Counters      []CounterDelta `json:"counters"`
	Findings      []Finding      `json:"findings"`
	Loss          LossInfo       `json:"loss"`
	Profile       Profile        `json:"profile"`
}

// TraceInfo describes the trace and the limits the analysis compared it with.
type TraceInfo struct {
	Start         time.Time      `json:"start"` // RFC 3339 with nanoseconds
	End           time.Time      `json:"end"`
	DurationS     float64        `json:"duration_s"`
	Interfaces    []string       `json:"interfaces"`
	BucketUs      int64          `json:"bucket_us"`      // width of a recorded bucket
	FineWindowUs  int64          `json:"fine_window_us"` // width of the windows findings are located with
	SampleMs      float64        `json:"sample_ms"`      // configured counter sample interval
	AttachMode    string         `json:"attach_mode"`
	BucketMode    string         `json:"bucket_mode,omitempty"` // per-cpu or shared; empty in recordings that predate it
	Kernel        string         `json:"kernel"`
	Hostname      string         `json:"hostname"`
	InstanceType  string         `json:"instance_type"`
	ProbeVersion  string         `json:"probe_version"`
	ENA           []InterfaceENA `json:"ena"`
	CounterSource string         `json:"counter_source"`
	Limits        Limits         `json:"limits"`
	Notes         []string       `json:"notes"` // caveats about the trace itself (short trace, no counters, ...)
}

// InterfaceENA says which allowance counters an interface had.
type InterfaceENA struct {
	Interface     string   `json:"interface"`
	Driver        string   `json:"driver"`
	DriverVersion string   `json:"driver_version"`
	ENA           bool     `json:"ena"`     // allowance counters available
	Present       []string `json:"present"` // allowance counters seen in at least one successful read
	Absent        []string `json:"absent"`  // allowance counters never seen: no finding can rest on them
	Reads         int      `json:"reads"`   // counter samples, failed ones included
	// ReadGuard is what the counter reads did on signs of a struggling
	// device (its health counters moved, reads slowed down): backed off,
	// then stopped. Empty when the device showed none.
	ReadGuard []ReadGuardEvent `json:"read_guard"`
}

// ReadGuardEvent is one sign of a struggling device and what the reads did.
type ReadGuardEvent struct {
	AtS        float64 `json:"at_s"` // since the trace's start
	Reason     string  `json:"reason"`
	Action     string  `json:"action"`      // record.CounterGuardBackedOff or CounterGuardStopped
	IntervalMs float64 `json:"interval_ms"` // the read interval from then on; 0 once stopped
}

// Limits are the limits the trace was compared with.
type Limits struct {
	BaselineBps  Limit `json:"baseline_bps"`   // aggregate per direction, sustained
	BurstBps     Limit `json:"burst_bps"`      // aggregate per direction while burst credits last
	FlowLimitBps Limit `json:"flow_limit_bps"` // per 5-tuple
	LinkLocalPPS Limit `json:"link_local_pps"` // per interface, DNS + IMDS + NTP together
	PPSAllowance Limit `json:"pps_allowance"`  // packets/s of the instance, both directions; AWS does not publish it
}

// Limit is one limit and where its value came from.
type Limit struct {
	Value float64 `json:"value"` // 0 when unknown
	Known bool    `json:"known"`
	// Source: "options" (given by the user), "recording" (recorded metadata
	// of an older build), "default" (documented AWS value), "lab", "imds ...",
	// "ethtool ...", the table the value was looked up in, or "unknown".
	Source string `json:"source"`
}

// Total is the exact traffic of one interface and direction since attach.
type Total struct {
	Interface string       `json:"interface"`
	Direction string       `json:"direction"`
	Packets   uint64       `json:"packets"`
	Bytes     uint64       `json:"bytes"`
	SYNs      uint64       `json:"syns"`
	Classes   []ClassTotal `json:"classes"` // by protocol class: tcp, udp, icmp, other
}

// ClassTotal is the traffic of one protocol class.
type ClassTotal struct {
	Class   string `json:"class"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// CounterDelta is how much one NIC counter moved during the trace. Resets
// (a value going down) are counted and never turned into negative deltas.
type CounterDelta struct {
	Interface string `json:"interface"`
	Name      string `json:"name"`
	Kind      string `json:"kind"` // "counter" or "gauge"
	Delta     uint64 `json:"delta"`
	Resets    int    `json:"resets"`
	// Gauge is set for gauges (conntrack_allowance_available), whose deltas
	// mean nothing: their first, lowest and last values instead.
	Gauge *GaugeSummary `json:"gauge,omitempty"`
}

// GaugeSummary is the course of a gauge over the trace.
type GaugeSummary struct {
	First uint64 `json:"first"`
	Min   uint64 `json:"min"`
	Max   uint64 `json:"max"`
	Last  uint64 `json:"last"`
}

// Finding kinds (stable strings).
const (
	KindMicroburstIn       = "microburst_in"
	KindMicroburstOut      = "microburst_out"
	KindPPSExceeded        = "pps_exceeded"
	KindConntrackExceeded  = "conntrack_exceeded"
	KindConntrackNearLimit = "conntrack_near_limit"
	KindLinkLocalExceeded  = "linklocal_exceeded"
	KindLinkLocalHot       = "linklocal_hot"
	KindFlowAtCap          = "flow_at_cap"
	KindBaselineExhausted  = "baseline_exhausted"
	KindJumboLeavingVPC    = "jumbo_leaving_vpc"
	KindIMDSHopLimit       = "imds_hop_limit"
)

// Kinds lists every finding kind above, the one list what enumerates kinds
// (serve's metrics series) derives from; TestKindsListsEveryKind keeps it
// whole.
var Kinds = []string{
	KindMicroburstIn, KindMicroburstOut, KindPPSExceeded, KindConntrackExceeded, KindConntrackNearLimit,
	KindLinkLocalExceeded, KindLinkLocalHot, KindFlowAtCap, KindBaselineExhausted, KindJumboLeavingVPC,
	KindIMDSHopLimit,
}

// Severities.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// Finding is one thing the trace shows, located in time, with its evidence,
// the flows that carried it and what to do about it.
type Finding struct {
	Kind         string     `json:"kind"`
	Severity     string     `json:"severity"`
	Interface    string     `json:"interface"`
	Direction    string     `json:"direction,omitempty"` // "ingress", "egress", or empty when both
	Start        time.Time  `json:"start"`
	End          time.Time  `json:"end"`
	StartOffsetS float64    `json:"start_offset_s"`
	EndOffsetS   float64    `json:"end_offset_s"`
	Summary      string     `json:"summary"`
	Evidence     []Evidence `json:"evidence"`
	// FlowsRankedBy is what Flows are ranked by and FlowShare.Share is a
	// share of: "bytes", "packets" or "syns".
	FlowsRankedBy string      `json:"flows_ranked_by"`
	Flows         []FlowShare `json:"flows"`
	// Victims are, for an incident, the flows whose packets came behind
	// its culprits' and were delayed or dropped while its queue drained
	// (Incident.DrainS): not culprits of an incident of their own.
	Victims []FlowShare `json:"victims,omitempty"`
	// Owners ranks who sent the finding's traffic, by FlowsRankedBy: the
	// processes of one pod (else one container, one cgroup) are one owner.
	// Empty when the trace found no owners.
	Owners         []OwnerShare `json:"owners,omitempty"`
	Recommendation string       `json:"recommendation"`
	// Incident is set on findings that rest on jumps of an allowance
	// counter: every jump of one counter on one interface that one cause
	// explains, from the first drop to the last.
	Incident *Incident `json:"incident,omitempty"`
	// Gauge is the course of conntrack_allowance_available before and
	// during a conntrack finding: the reads where it moved by a tenth of
	// its highest or more, with the first, the first at its lowest and the
	// last.
	Gauge []GaugePoint `json:"gauge,omitempty"`
	// IMDS is set on imds_hop_limit findings: the client and what became
	// of its requests.
	IMDS *IMDSDiagnosis `json:"imds,omitempty"`

	// flowsFromNs and flowsToNs are the window Flows were ranked over
	// when it is not the finding's own (a connection flood's attribution
	// window starts at its first SYN): its owners are ranked over it too.
	flowsFromNs, flowsToNs int64
	// ppsUnseen marks a pps_exceeded incident whose traffic, as the host
	// saw it, explains under a quarter of its drops (foldInboundPPS).
	ppsUnseen bool
	// Impact is set on the findings of an allowance that queues or drops
	// (microburst_in, microburst_out, pps_exceeded, baseline_exhausted):
	// what the TCP flows that ran through it lost, or waited.
	Impact *Impact `json:"impact,omitempty"`
	// LinkLocal is set on linklocal_exceeded and linklocal_hot findings
	// when the datapath copied link-local payloads: what the offenders
	// asked, and the fixes ranked.
	LinkLocal *LinkLocalDetail `json:"linklocal,omitempty"`
}

// IMDSDiagnosis is one IMDS client whose IMDSv2 token replies died on the
// way, from the IMDS packets the datapath recognised.
type IMDSDiagnosis struct {
	// Client is the owner's name when attribution found one (pod,
	// container, unit, cgroup, command), else the source address of its
	// requests (NATed containers share the host's).
	Client           string        `json:"client"`
	Owner            *record.Owner `json:"owner,omitempty"`
	TokenRequests    int           `json:"token_requests"`
	TokenRepliesTTL1 int           `json:"token_replies_ttl_1"` // token replies that arrived with TTL 1
	ReplyTTL         int           `json:"reply_ttl"`           // lowest TTL of a token reply
	TimeExceeded     int           `json:"time_exceeded"`       // ICMP time exceeded the host sent toward IMDS
	GetsWithoutToken int           `json:"gets_without_token"`  // IMDSv1 fallback (or a token header past the look)
	GetsWithToken    int           `json:"gets_with_token"`
	// WaitedS is the time from each token request that got no usable
	// reply to the client's next request, summed.
	WaitedS float64 `json:"waited_s"`
	// Requests are the client's requests in time order (the first 20 of
	// RequestsTotal).
	Requests      []IMDSRequest `json:"requests"`
	RequestsTotal int           `json:"requests_total"`
}

// IMDSRequest is one request to IMDS and what came back.
type IMDSRequest struct {
	OffsetS      float64 `json:"offset_s"`
	Kind         string  `json:"kind"` // token_request, get_without_token, get_with_token
	Flow         string  `json:"flow"`
	ReplyTTL     int     `json:"reply_ttl,omitempty"` // TTL of the reply; absent when none arrived
	TimeExceeded bool    `json:"time_exceeded,omitempty"`
	WaitedS      float64 `json:"waited_s,omitempty"` // until the client's next request, when no usable reply came
}

// Incident is what one counter did over one finding.
type Incident struct {
	Counter   string  `json:"counter"`
	Delta     uint64  `json:"delta"`      // the counter's total rise
	Jumps     int     `json:"jumps"`      // reads that saw it rise
	DurationS float64 `json:"duration_s"` // first to last drop, as located in the traffic
	DropRate  float64 `json:"drop_rate"`  // Delta per second of DurationS
	// Timeline is every jump: when the read that saw it began, and by how
	// much the counter rose since the read before.
	Timeline []CounterJump `json:"timeline"`
	// Peak is the sub-window of PeakWindowS with the most offending traffic.
	Peak IncidentPeak `json:"peak"`
	// CounterLagS is how long after the traffic the counter showed its
	// drops, CounterLagLowS and CounterLagHighS the range the jumps agree
	// with, and CounterLagSource where that came from: "option" (given),
	// "estimated" (learned from where the traffic that stands out ended
	// before the jumps), or "read_duration" (nothing to learn from: the
	// slowest read).
	CounterLagS      float64 `json:"counter_lag_s"`
	CounterLagLowS   float64 `json:"counter_lag_low_s"`
	CounterLagHighS  float64 `json:"counter_lag_high_s"`
	CounterLagSource string  `json:"counter_lag_source"`
	// CounterLagBounded is true where the run only bounded an estimated
	// lag, to CounterLagLowS and CounterLagHighS (a range wider than 10 ms
	// and than its middle, which could be more than 5 ms from the lag):
	// CounterLagS, their middle, is no estimate.
	CounterLagBounded bool `json:"counter_lag_bounded"`
	// CounterRefreshS is the spacing of the reads at which the counter
	// changed (0: at successive reads, the device shows every change at
	// the next read); CounterRefreshKnown is false when the changes were
	// too few or too far apart to tell, or came where the traffic's
	// drops did (CounterRefreshFollowsTraffic); CounterRefreshS is then
	// what the look-back allowed for, not the device's (0, or where the
	// incidents disagree with 0 the longest refresh the changes' reads
	// allow, up to 1 s, CounterLagLowS then that much under what they
	// agree on; or the period set aside), and the evidence leaves it out.
	CounterRefreshS     float64 `json:"counter_refresh_s"`
	CounterRefreshKnown bool    `json:"counter_refresh_known"`
	// CounterRefreshFollowsTraffic: a period the changes' spacing showed
	// was set aside, the changes having come where the traffic's drops
	// did (at every read that held a pulsed sender's, or one read per
	// burst): the spacing is the traffic's as much as a refresh's.
	CounterRefreshFollowsTraffic bool `json:"counter_refresh_follows_traffic,omitempty"`
	// CounterRefreshGiven: the refresh is the one given
	// (Options.CounterRefresh, --counter-refresh), not learned.
	CounterRefreshGiven bool `json:"counter_refresh_given,omitempty"`
	// LookBackS is how far before each read's interval its traffic was
	// looked for: the highest lag and one refresh.
	LookBackS float64 `json:"look_back_s"`
	// DrainS is how long after its traffic the incident's drops went on,
	// counted late by jumps whose look-back lay wholly after it (a queue
	// the traffic filled, draining): the stretch its victims are from.
	DrainS float64 `json:"drain_s"`
	// LearnedAllowance is, when no allowance was known, the rate above
	// which the counter moved, as this incident shows it.
	LearnedAllowance *LearnedAllowance `json:"learned_allowance,omitempty"`
	// Recurrences is, where the finding folds incidents led by the same
	// flow, each within 200 ms of the one before, how many (absent: one).
	Recurrences int `json:"recurrences,omitempty"`
}

// LearnedAllowance is an allowance estimated from the run: the rate that
// passed while the counter moved, with the range the incident's located
// edges allow.
type LearnedAllowance struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "pps" or "bps"
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// CounterJump is one read that saw an allowance counter rise. Of is,
// where that read showed other incidents' drops too (causes a refresh
// showed at once), the whole rise, and Delta this incident's share of it
// by its traffic's excess; 0 where the rise is all this incident's.
type CounterJump struct {
	Time    time.Time `json:"time"`
	OffsetS float64   `json:"offset_s"`
	Delta   uint64    `json:"delta"`
	Of      uint64    `json:"of,omitempty"`
}

// IncidentPeak is the busiest sub-window of an incident.
type IncidentPeak struct {
	Start   time.Time `json:"start"`
	OffsetS float64   `json:"offset_s"`
	WindowS float64   `json:"window_s"`
	Rate    float64   `json:"rate"` // of the offending traffic, in Unit
	Unit    string    `json:"unit"` // "bps", "pps" or "per_s" (SYNs)
}

// GaugePoint is one read of a gauge.
type GaugePoint struct {
	Time    time.Time `json:"time"`
	OffsetS float64   `json:"offset_s"`
	Value   uint64    `json:"value"`
}

// Evidence is one number a finding rests on.
type Evidence struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "bps", "pps", "bytes", "packets", "count", "ratio", "s", ...
}

// FlowShare is one flow's traffic inside a finding's window.
type FlowShare struct {
	// Owner is the process, container or pod behind the flow, when found.
	Owner    *record.Owner `json:"owner,omitempty"`
	Proto    string        `json:"proto"`
	Src      string        `json:"src"` // ip:port
	Dst      string        `json:"dst"`
	Service  string        `json:"service,omitempty"` // link-local service, when the flow is one
	Bytes    uint64        `json:"bytes"`
	Packets  uint64        `json:"packets"`
	SYNs     uint64        `json:"syns,omitempty"`
	MeanSize float64       `json:"mean_size"`          // bytes per packet in the window
	MinSize  uint32        `json:"min_size,omitempty"` // smallest packet of the flow so far
	MaxSize  uint32        `json:"max_size,omitempty"`
	// Share is of the window's total by Finding.FlowsRankedBy; for Source
	// "snapshots", of what all flows moved within the window had each sent
	// its drain intervals' traffic evenly over when it was seen in them
	// (Bytes and Packets are those intervals' whole).
	Share float64 `json:"share"`
	// Flows is how many 5-tuples the row sums, when more than one: SYN
	// sources are grouped per source address and destination, and a source
	// port that varies is shown as "*" (Src "10.0.0.7:*").
	Flows int `json:"flows,omitempty"`
	// SYNsRetried is how many of SYNs were a 5-tuple's second or later SYN
	// (the client retrying after 1, 3, 7 s, every second for the first four
	// on Linux 6.7+: its SYN was dropped);
	// SYNRate is SYNs per second over the finding's attribution window.
	SYNsRetried uint64  `json:"syns_retried,omitempty"`
	SYNRate     float64 `json:"syn_rate,omitempty"`
	// Source says how precisely the flow is placed in the window:
	// "window_events" (per fine window) or "snapshots" (per drain interval
	// overlapping the window, so possibly more than the window itself).
	Source string `json:"source"`
}

// LossInfo is everything the trace could not see, summed and per interface.
type LossInfo struct {
	Total               LossCounts      `json:"total"`
	Interfaces          []InterfaceLoss `json:"interfaces"`
	CounterReadFailures int             `json:"counter_read_failures"`
	CounterResets       int             `json:"counter_resets"`
	ReadFailures        []ReadFailure   `json:"read_failures"`
	Resets              []CounterReset  `json:"resets"`
}

// LossCounts mirrors record.Loss.
type LossCounts struct {
	FlowMapFull       uint64 `json:"flow_map_full"`
	RingbufFull       uint64 `json:"ringbuf_full"`
	BucketOverwritten uint64 `json:"bucket_overwritten"`
	SliceOverwritten  uint64 `json:"slice_overwritten"`
	FlowsEvicted      uint64 `json:"flows_evicted"`
	IMDSEvents        uint64 `json:"imds_events"` // IMDS events dropped: their ring buffer was full
	// LinkLocalPayloads are link-local payload events not recorded: over
	// the rate cap, or their ring buffer full.
	LinkLocalPayloads uint64 `json:"linklocal_payloads"`
}

// InterfaceLoss is the loss of one interface.
type InterfaceLoss struct {
	Interface           string     `json:"interface"`
	Counts              LossCounts `json:"counts"`
	CounterReads        int        `json:"counter_reads"`
	CounterReadFailures int        `json:"counter_read_failures"`
	CounterResets       int        `json:"counter_resets"`
}

// ReadFailure is one failed counter read.
type ReadFailure struct {
	Interface string    `json:"interface"`
	Time      time.Time `json:"time"` // of the first of the run
	OffsetS   float64   `json:"offset_s"`
	Error     string    `json:"error"`
	// Count is how many reads in a row failed this way; LastOffsetS is
	// when the last of them began.
	Count       int     `json:"count"`
	LastOffsetS float64 `json:"last_offset_s"`
}

// CounterReset is a counter that went down between two reads: a driver reset
// or a failed read that returned zeros, never negative traffic.
type CounterReset struct {
	Interface string    `json:"interface"`
	Name      string    `json:"name"`
	Time      time.Time `json:"time"`
	OffsetS   float64   `json:"offset_s"`
	From      uint64    `json:"from"`
	To        uint64    `json:"to"`
}

// Profile is the shape of the traffic, findings or not.
type Profile struct {
	Rates              []RateProfile      `json:"rates"`
	TopFlows           []FlowProfile      `json:"top_flows"`
	LinkLocal          []LinkLocalProfile `json:"link_local"`
	SizeMix            []SizeMix          `json:"size_mix"`
	CounterReadLatency []ReadLatency      `json:"counter_read_latency"`
}

// RateProfile puts the peaks of one interface and direction beside the
// averages CloudWatch would show for the same traffic.
type RateProfile struct {
	Interface string    `json:"interface"`
	Direction string    `json:"direction"`
	MeanBps   float64   `json:"mean_bps"` // over the whole trace
	MeanPPS   float64   `json:"mean_pps"`
	Peaks     []Peak    `json:"peaks"`    // 1 ms, 100 ms, 1 s
	Averages  []Average `json:"averages"` // 1 min, 5 min
}

// Peak is the highest rate over any window of one width (windows aligned to
// the bucket grid, sliding by one bucket).
type Peak struct {
	WindowS     float64   `json:"window_s"`
	Bps         float64   `json:"bps"`
	BpsAt       time.Time `json:"bps_at"` // start of the window
	BpsAtOffset float64   `json:"bps_at_offset_s"`
	PPS         float64   `json:"pps"`
	PPSAt       time.Time `json:"pps_at"`
	PPSAtOffset float64   `json:"pps_at_offset_s"`
	// Partial: the trace is shorter than the window, so the values are the
	// average over the trace.
	Partial bool `json:"partial"`
}

// Average is what a CloudWatch-style metric of one period reports:
// bits/s = bytes in the period / period seconds x 8.
type Average struct {
	PeriodS float64 `json:"period_s"`
	// Bps and PPS are the highest average of the whole periods in the trace
	// (periods aligned to the trace start), the highest point CloudWatch
	// would plot.
	Bps     float64 `json:"bps"`
	PPS     float64 `json:"pps"`
	Periods int     `json:"periods"` // whole periods in the trace
	// Partial: no whole period fits in the trace; Bps and PPS are then the
	// average over the CoveredS seconds of the trace.
	Partial  bool    `json:"partial"`
	CoveredS float64 `json:"covered_s"`
}

// FlowProfile is one of the flows that moved the most bytes.
type FlowProfile struct {
	Interface  string        `json:"interface"`
	Proto      string        `json:"proto"`
	Src        string        `json:"src"`
	Dst        string        `json:"dst"`
	Service    string        `json:"service,omitempty"`
	Directions string        `json:"directions"` // "ingress", "egress" or "both"
	Bytes      uint64        `json:"bytes"`
	Packets    uint64        `json:"packets"`
	SYNs       uint64        `json:"syns"`
	MeanSize   float64       `json:"mean_size"`
	MinSize    uint32        `json:"min_size"`
	MaxSize    uint32        `json:"max_size"`
	MeanBps    float64       `json:"mean_bps"` // over the flow's active span (first to last seen)
	PeakBps    float64       `json:"peak_bps"` // highest fine-window throughput (window events), else highest drain-interval throughput
	FirstSeen  time.Time     `json:"first_seen"`
	LastSeen   time.Time     `json:"last_seen"`
	Owner      *record.Owner `json:"owner,omitempty"`
}

// OwnerShare is one owner of a finding's traffic: its flows summed, Share
// of all the flows of the finding's span (owned or not) by the finding's
// FlowsRankedBy. Owner keeps the fields its flows share.
type OwnerShare struct {
	Owner   record.Owner `json:"owner"`
	Share   float64      `json:"share"`
	Flows   int          `json:"flows"`
	Bytes   uint64       `json:"bytes"`
	Packets uint64       `json:"packets"`
	SYNs    uint64       `json:"syns,omitempty"`
}

// LinkLocalProfile is the packet rate to one link-local service (or to all
// of them, Service "all", the quantity the 1024 pps limit applies to).
type LinkLocalProfile struct {
	Interface    string  `json:"interface"`
	Direction    string  `json:"direction"`
	Service      string  `json:"service"` // "imds", "dns", "ntp" or "all"
	Packets      uint64  `json:"packets"`
	PeakPPS1s    float64 `json:"peak_pps_1s"`    // highest 1 s average
	PeakPPSShort float64 `json:"peak_pps_short"` // highest rate over a ShortWindowS window
	ShortWindowS float64 `json:"short_window_s"`
	LimitPPS     float64 `json:"limit_pps"`
	PeakShare1s  float64 `json:"peak_share_1s"` // PeakPPS1s / LimitPPS
}

// SizeMix is the packet-size histogram of one interface and direction.
type SizeMix struct {
	Interface    string           `json:"interface"`
	Direction    string           `json:"direction"`
	Classes      []SizeClassCount `json:"classes"`
	SuperPackets uint64           `json:"super_packets"`
	MeanSize     float64          `json:"mean_size"` // from the exact totals
}

// SizeClassCount is the packets of one size class.
type SizeClassCount struct {
	Class   string  `json:"class"` // record.SizeClassNames
	Packets uint64  `json:"packets"`
	Share   float64 `json:"share"`
}

// ReadLatency is how long the counter reads of one interface took
// (AfterNs - BeforeNs): the uncertainty of every counter timestamp.
type ReadLatency struct {
	Interface string  `json:"interface"`
	Reads     int     `json:"reads"`
	MinUs     float64 `json:"min_us"`
	MedianUs  float64 `json:"median_us"`
	MaxUs     float64 `json:"max_us"`
	// HeldMs is the reads' durations summed: how long they held the
	// kernel's RTNL lock in all (an upper bound: a read's stamps include
	// the time its thread waited for a CPU).
	HeldMs float64 `json:"held_ms"`
}
