// Package record holds the plain data of one trace: what the eBPF programs
// counted, what the ENA counters said, and the metadata needed to line them up.
// It is the only thing the analyzer and the report renderers read, so it has no
// kernel dependency and is tested with plain values.
//
// Every timestamp named ...Ns is CLOCK_MONOTONIC nanoseconds, the clock of
// bpf_ktime_get_ns(). Wall-clock time appears only in Meta.Clock, the pairs
// used to render times for people.
package record

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Direction is the tc hook a packet was seen on.
type Direction uint8

const (
	Ingress Direction = 0
	Egress  Direction = 1
)

// NumDirections sizes per-direction arrays.
const NumDirections = 2

func (d Direction) String() string {
	switch d {
	case Ingress:
		return "ingress"
	case Egress:
		return "egress"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Service is a link-local service that shares the 1024 packets/s allowance
// of an interface (AWS-LIMITS.md).
type Service uint8

const (
	ServiceNone Service = 0
	ServiceIMDS Service = 1
	ServiceDNS  Service = 2
	ServiceNTP  Service = 3
)

// Services lists the link-local services in the order of Bucket.LinkLocal.
var Services = []Service{ServiceIMDS, ServiceDNS, ServiceNTP}

// NumServices is the length of Bucket.LinkLocal.
const NumServices = 3

func (s Service) String() string {
	switch s {
	case ServiceNone:
		return "none"
	case ServiceIMDS:
		return "imds"
	case ServiceDNS:
		return "dns"
	case ServiceNTP:
		return "ntp"
	}
	return fmt.Sprintf("service(%d)", uint8(s))
}

// Index returns the position of s in Bucket.LinkLocal, or -1 for ServiceNone.
func (s Service) Index() int {
	if s == ServiceNone || s > ServiceNTP {
		return -1
	}
	return int(s) - 1
}

// Class is the protocol class of the per-direction totals. Every packet lands
// in exactly one class, so the totals never miss a packet.
type Class uint8

const (
	ClassTCP   Class = 0
	ClassUDP   Class = 1
	ClassICMP  Class = 2 // ICMP and ICMPv6
	ClassOther Class = 3 // ARP, unknown protocols, truncated or malformed frames
)

// NumClasses sizes per-class arrays.
const NumClasses = 4

func (c Class) String() string {
	switch c {
	case ClassTCP:
		return "tcp"
	case ClassUDP:
		return "udp"
	case ClassICMP:
		return "icmp"
	case ClassOther:
		return "other"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// SizeClassLimits are the upper bounds of the packet-size classes. A packet's
// size is its layer-3 length (IP header and payload, the quantity an MTU
// limits), so 1500 is a full frame on the internet path and 9001 a jumbo frame
// inside a VPC. Sizes above the last bound land in the last class: on the wire
// that only happens with an MTU above 9001, since GSO/GRO super-packets are
// counted by segment size and tallied apart in SizeSlice.SuperPackets.
var SizeClassLimits = []int{64, 128, 256, 512, 1024, 1500, 9001}

// NumSizeClasses is len(SizeClassLimits)+1 (the last class is "larger").
const NumSizeClasses = 8

// SizeClassNames label the classes for reports.
var SizeClassNames = []string{"<=64", "65-128", "129-256", "257-512", "513-1024", "1025-1500", "1501-9001", ">9001"}

// SizeClassOf returns the class of a packet of layer-3 size n, with the same
// rule as the eBPF program.
func SizeClassOf(n int) int {
	for i, lim := range SizeClassLimits {
		if n <= lim {
			return i
		}
	}
	return len(SizeClassLimits)
}

// Bucket is one fine time bucket of one interface and direction.
type Bucket struct {
	StartNs   int64 // monotonic start of the bucket
	Packets   uint64
	Bytes     uint64
	SYNs      uint64 // TCP SYN without ACK: new connection attempts
	LinkLocal [NumServices]uint64
	// Retrans are TCP segments sent again, by the wire's sequence test:
	// a segment whose range ends at or before the highest already seen on
	// its flow. Zero in recordings made before impact was measured
	// (Meta.Impact false).
	Retrans uint64
}

// Series is the bucket time series of one interface and direction. Buckets
// are sparse (empty ones are left out) and sorted by StartNs.
type Series struct {
	Interface string
	Direction Direction
	WidthNs   int64
	Buckets   []Bucket
}

// FlowKey names a flow as its packets carry it (not normalised: the two
// directions of one TCP connection are two flows).
type FlowKey struct {
	Proto uint8 // IP protocol number; 0 for non-IP
	Src   netip.AddrPort
	Dst   netip.AddrPort
}

func (k FlowKey) String() string {
	return fmt.Sprintf("%s %s -> %s", ProtoName(k.Proto), k.Src, k.Dst)
}

// ProtoName names the common IP protocols.
func ProtoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmpv6"
	}
	return fmt.Sprintf("ip%d", p)
}

// ProtoNumber is the protocol number ProtoName names (0 for a name it
// does not know).
func ProtoNumber(name string) uint8 {
	switch name {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "icmp":
		return 1
	case "icmpv6":
		return 58
	}
	var p uint8
	if _, err := fmt.Sscanf(name, "ip%d", &p); err != nil {
		return 0
	}
	return p
}

// FlowStats are the cumulative counters of one flow at one instant.
type FlowStats struct {
	Packets     uint64
	Bytes       uint64
	SYNs        uint64
	TCPFlags    uint8 // OR of every TCP flag byte seen
	Directions  uint8 // bit 0 ingress, bit 1 egress
	Service     Service
	FirstSeenNs int64
	LastSeenNs  int64
	MinSize     uint32 // smallest packet, layer-3 size
	MaxSize     uint32 // largest packet, layer-3 size

	// Impact: what TCP says of loss and queueing (zero in recordings made
	// before impact was measured, Meta.Impact false). RetransWire are
	// the flow's segments sent again by the wire's sequence test (a
	// remote or forwarded sender's included); RetransLocal what the local
	// socket's own count (tcp_sock total_retrans) rose by while the flow
	// was traced; both cumulative. SRTTMinUs and SRTTMaxUs are the
	// smallest and largest smoothed RTT of the local socket since the
	// flow's previous snapshot, in microseconds (0: no socket, no sample).
	// RetransTail are those of RetransWire that ended at the highest
	// sequence sent: tail loss probes, which a queue holding ACKs back
	// sets off without a loss. GapMaxUs is the longest silence of the
	// flow (this direction) that ended since its previous snapshot: the
	// time before one of its TCP packets since the one before it, in
	// microseconds, up to 4.29 s. For an upload's ACKs it is how long its
	// segments were not answered: queued, lost, or not sent (0 in
	// recordings made before it was measured). DSACKLocal is what the
	// local socket's D-SACKs received (dsack_dups) rose by while traced,
	// cumulative: segments the receiver got twice, of RetransLocal those
	// sent again needlessly (a timeout fired while the original waited in
	// a queue). EchoAgeMinMs and
	// EchoAgeMaxMs, when Echoed, are the least and greatest age of the
	// TCP timestamps its ACKs echoed since its previous snapshot: this
	// host's clock in ms less the echo, which is the answered segment's
	// RTT plus an offset of the connection's (RFC 7323: the sender's
	// random offset, and a remote sender's clock), so only their
	// differences within the flow mean anything; uint32 arithmetic, the
	// offset wraps (EchoRiseMs).
	RetransWire  uint64 `json:",omitempty"`
	RetransTail  uint64 `json:",omitempty"`
	RetransLocal uint64 `json:",omitempty"`
	DSACKLocal   uint64 `json:",omitempty"`
	SRTTMinUs    uint32 `json:",omitempty"`
	SRTTMaxUs    uint32 `json:",omitempty"`
	GapMaxUs     uint32 `json:",omitempty"`
	Echoed       bool   `json:",omitempty"`
	EchoAgeMinMs uint32 `json:",omitempty"`
	EchoAgeMaxMs uint32 `json:",omitempty"`
}

// EchoRiseMs is how much later than age from an age was, in ms: the ages
// are one connection's, so their offset cancels, and a signed 32-bit
// distance reads them across its wrap.
func EchoRiseMs(from, age uint32) int32 { return int32(age - from) }

// FlowSnapshot is a flow's cumulative counters read at TimeNs. Snapshots of
// one flow taken at successive drains give its throughput per drain interval.
type FlowSnapshot struct {
	TimeNs    int64
	Interface string
	Key       FlowKey
	FlowStats
}

// WindowEvent says a flow moved at least Meta.HeavyBytes in one fine window.
type WindowEvent struct {
	Interface string
	Direction Direction
	Key       FlowKey
	StartNs   int64 // window start
	WidthNs   int64
	Packets   uint64
	Bytes     uint64
}

// SizeSlice is the wire packet-size histogram of one coarse slice.
type SizeSlice struct {
	Interface    string
	Direction    Direction
	StartNs      int64
	WidthNs      int64
	Counts       [NumSizeClasses]uint64
	SuperPackets uint64 // GSO/GRO skbs that stood for more than one wire packet
}

// Totals are the exact per-direction counts since attach, by protocol class.
type Totals struct {
	Interface string
	Direction Direction
	Packets   [NumClasses]uint64
	Bytes     [NumClasses]uint64
	SYNs      uint64
}

// SumPackets is the packets of every class.
func (t Totals) SumPackets() uint64 {
	var s uint64
	for _, v := range t.Packets {
		s += v
	}
	return s
}

// SumBytes is the bytes of every class.
func (t Totals) SumBytes() uint64 {
	var s uint64
	for _, v := range t.Bytes {
		s += v
	}
	return s
}

// IMDSKind is what the datapath recognised in a packet to or from IMDS.
type IMDSKind uint8

const (
	IMDSTokenRequest IMDSKind = 1 // egress TCP to IMDS port 80: "PUT /latest/api/token"
	// IMDSGetNoToken is an egress "GET " whose first IMDSPeekBytes payload
	// bytes hold no X-aws-ec2-metadata-token header: IMDSv1, or a token
	// header further in than the datapath looks.
	IMDSGetNoToken   IMDSKind = 2
	IMDSGetToken     IMDSKind = 3 // an egress "GET " with the token header
	IMDSReply        IMDSKind = 4 // ingress TCP from IMDS port 80 whose payload starts "HTTP/"
	IMDSTimeExceeded IMDSKind = 5 // egress ICMP/ICMPv6 time exceeded toward IMDS quoting a TCP packet
)

// IMDSPeekBytes is how many payload bytes of a GET the datapath searches
// for the token header.
const IMDSPeekBytes = 512

func (k IMDSKind) String() string {
	switch k {
	case IMDSTokenRequest:
		return "token_request"
	case IMDSGetNoToken:
		return "get_without_token"
	case IMDSGetToken:
		return "get_with_token"
	case IMDSReply:
		return "reply"
	case IMDSTimeExceeded:
		return "time_exceeded"
	}
	return fmt.Sprintf("imds_kind(%d)", uint8(k))
}

// IMDSEvent is one IMDS packet the datapath recognised. Key is the packet's
// flow, except for a time exceeded, where it is the flow of the packet the
// ICMP error quotes (a reply from IMDS the host could not forward). TTL is
// the IP TTL / IPv6 hop limit of the packet, or of the quoted one.
type IMDSEvent struct {
	Interface string
	Direction Direction
	TimeNs    int64
	Kind      IMDSKind
	Key       FlowKey
	TTL       uint8
}

// LinkLocalPayload is the start of one link-local packet's payload, as the
// datapath copied it: a DNS message (UDP, or TCP with its length prefix), an
// IMDS request's request line (IMDSKind says whether it carried the token
// header; the loader drops the headers, which carry the token itself), or
// an NTP packet's first LinkLocalNTPBytes. Len is the packet's
// payload length, Data its first LinkLocalPayloadBytes at most. TCPSeq is a
// TCP segment's sequence number, which a retransmission repeats; 0 for UDP
// and in recordings made before it was kept (a segment whose number is 0
// counts as new: one in 2^32).
type LinkLocalPayload struct {
	Interface string
	Direction Direction
	TimeNs    int64
	Service   Service
	Key       FlowKey
	Len       uint16
	IMDSKind  IMDSKind `json:",omitempty"`
	TCPSeq    uint32   `json:",omitempty"`
	Data      []byte
}

// The payload bytes the datapath copies of a link-local packet (LL_PAYLOAD_MAX
// and LL_NTP_BYTES of bpf/include/llpayload.h; the loader's tests hold them
// equal).
const (
	LinkLocalPayloadBytes = 256
	LinkLocalNTPBytes     = 4
)

// Loss counts what the datapath or the collector could not record. None of
// it is silent: every report shows it.
type Loss struct {
	Interface         string
	FlowMapFull       uint64 // packets of new flows whose two buckets were full of live flows
	RingbufFull       uint64 // window and flow-eviction events dropped: ring buffer full
	BucketOverwritten uint64 // packets in buckets reused before userspace read them
	SliceOverwritten  uint64 // packets in size slices reused before userspace read them
	FlowsEvicted      uint64 // idle flows whose table slot went to a new flow (counters kept)
	IMDSEvents        uint64 `json:",omitempty"` // IMDS events dropped: their ring buffer was full
	// LinkLocalPayloads are link-local payload events not recorded: over
	// the per-interface rate cap, or their ring buffer full.
	LinkLocalPayloads uint64 `json:",omitempty"`
}

// CounterSample is one read of an interface's NIC counters. The read happened
// inside [BeforeNs, AfterNs]; a counter jump between two samples happened in
// (previous AfterNs, this BeforeNs].
type CounterSample struct {
	Interface string
	BeforeNs  int64
	AfterNs   int64
	Values    map[string]uint64 // by ethtool name; a missing name is absent, not zero
	Err       string            // a failed read; Values is then empty
}

// ClockPair maps the monotonic clock to wall-clock time at one instant.
type ClockPair struct {
	MonoNs int64
	Wall   time.Time
}

// InterfaceInfo describes a traced interface.
type InterfaceInfo struct {
	Name          string
	Index         int
	Driver        string // from ETHTOOL_GDRVINFO; "ena" on EC2
	DriverVersion string
	ENA           bool // allowance counters available
	MTU           int
	// Down: the interface was not up when the trace began, so it could
	// carry no traffic until it came up.
	Down bool `json:",omitempty"`
}

// The actions of a CounterGuardEvent.
const (
	CounterGuardBackedOff = "backed off"
	CounterGuardStopped   = "stopped reading"
)

// CounterGuardEvent is one sign of a struggling device on Interface and what
// the counter reads did about it (ena.Guard): "backed off" to IntervalNs, or
// "stopped reading".
type CounterGuardEvent struct {
	Interface  string
	AtNs       int64 // CLOCK_MONOTONIC
	Reason     string
	Action     string
	IntervalNs int64 `json:",omitempty"`
}

// Meta is what a reader needs to interpret the rest.
type Meta struct {
	Version      string // enaprobe version that recorded
	Kernel       string
	Hostname     string
	InstanceType string
	AttachMode   string // tcx or tc
	BucketMode   string // per-cpu or shared: how packets reached the time buckets
	Interfaces   []InterfaceInfo
	// The bucket width is the series' (Recording.BucketNs): one datapath
	// made them all.
	WindowNs      int64
	SliceNs       int64
	HeavyBytes    uint64 // window event threshold, bytes per fine window
	SampleNs      int64  // counter sample interval
	FlowLimitBps  float64
	VPCResolver   netip.Addr // the VPC DNS resolver (base+2), when known
	Start, End    ClockPair
	CounterSource string // "ethtool", "file:PATH", "lab", "replay", or "none"
	// Analysis holds the inputs of the trace's own analysis, so that
	// analyzing the recording again reproduces its report. Nil in
	// recordings of builds that did not keep them.
	Analysis *AnalysisInputs `json:",omitempty"`

	// AttachNotes say where enaprobe's programs could not run first on
	// their hook (another program ahead), or had to move back to the head.
	AttachNotes []string `json:",omitempty"`

	// Trigger says what made serve write the recording: TriggerSnapshot
	// (SIGUSR1 or POST /snapshot) or TriggerIncident (a counter jumped);
	// empty for a trace.
	Trigger string `json:",omitempty"`
	// Impact: the datapath measured TCP retransmissions and srtt
	// (Bucket.Retrans, FlowStats' impact fields). False in recordings of
	// builds before it, whose findings' impact is unknown.
	Impact bool `json:",omitempty"`

	// OwnerNotes say, once, why flows have no owner: no cgroup v2, the
	// cgroup programs could not attach, sockets closed before they were
	// seen, owners evicted from their bounded maps.
	OwnerNotes []string `json:",omitempty"`

	// CounterGuard is what the counter reads' guard did: when a device's
	// health counters moved or its reads slowed down, reads backed off,
	// then stopped.
	CounterGuard []CounterGuardEvent `json:",omitempty"`
}

// The values of Meta.Trigger.
const (
	TriggerSnapshot = "snapshot"
	TriggerIncident = "incident"
)

// Limit is one limit an analysis compared the trace with, and where its
// value came from ("options", "lab", "default", "imds ...", "table ...").
// Value 0 is unknown.
type Limit struct {
	Value  float64
	Source string
}

// AnalysisInputs are what an analysis compared the trace with, each with
// its origin.
type AnalysisInputs struct {
	InstanceType       string
	InstanceTypeSource string
	BaselineBps        Limit
	BurstBps           Limit
	FlowLimitBps       Limit
	LinkLocalPPS       Limit
	PPSAllowance       Limit
	FineWindowNs       int64
	// CounterLagNs is the --counter-lag given: 0 estimated (auto), -1 none.
	CounterLagNs int64 `json:",omitempty"`
	// CounterRefreshNs is the --counter-refresh given: 0 learned (auto),
	// -1 every read.
	CounterRefreshNs int64 `json:",omitempty"`
}

// Owner is who sent or received a flow's packets on this host, as far as
// the trace could tell. Every field is optional; How says how it was found.
type Owner struct {
	PID       uint32 `json:"pid,omitempty"`
	Comm      string `json:"comm,omitempty"`
	Cgroup    string `json:"cgroup,omitempty"`    // cgroup v2 path, from the cgroup root
	Unit      string `json:"unit,omitempty"`      // systemd unit
	Container string `json:"container,omitempty"` // container id (Docker, containerd, CRI-O)
	Pod       string `json:"pod,omitempty"`       // Kubernetes namespace/name
	How       string `json:"how,omitempty"`       // "socket", "veth" or "address"
}

// String names an owner for people, the process first and then the most
// telling place it runs in: `java[4121] payments.service`,
// `coredns pod kube-system/coredns-5d78c9869d-x7k2p (by veth)`.
func (o Owner) String() string {
	var parts []string
	switch {
	case o.Comm != "" && o.PID != 0:
		parts = append(parts, fmt.Sprintf("%s[%d]", o.Comm, o.PID))
	case o.Comm != "":
		parts = append(parts, o.Comm)
	case o.PID != 0:
		parts = append(parts, fmt.Sprintf("pid %d", o.PID))
	}
	switch {
	case o.Pod != "":
		parts = append(parts, "pod "+o.Pod)
	case o.Container != "":
		id := o.Container
		if len(id) > 12 { // as docker ps shows it
			id = id[:12]
		}
		parts = append(parts, "container "+id)
	case o.Unit != "":
		parts = append(parts, o.Unit)
	case o.Cgroup != "":
		parts = append(parts, "cgroup "+o.Cgroup)
	}
	if o.How != "" && o.How != "socket" {
		parts = append(parts, "(by "+o.How+")")
	}
	return strings.Join(parts, " ")
}

// FlowOwner ties a flow on an interface to its owner.
type FlowOwner struct {
	Interface string
	Key       FlowKey
	Owner     Owner
}

// Recording is everything one trace saw.
type Recording struct {
	Meta   Meta
	Series []Series
	Flows  []FlowSnapshot
	// Owners are the flows whose owner was found (at most one entry per
	// interface and key).
	Owners  []FlowOwner `json:",omitempty"`
	Windows []WindowEvent
	// IMDS are the IMDS packets recognised (IMDSv2 diagnosis), in time
	// order per interface.
	IMDS []IMDSEvent `json:",omitempty"`
	// LinkLocalPayloads are the starts of the link-local packets' payloads
	// (DNS, IMDS requests, NTP), rate-capped per interface, in time order
	// per interface.
	LinkLocalPayloads []LinkLocalPayload `json:",omitempty"`
	Sizes             []SizeSlice
	Totals            []Totals
	Loss              []Loss
	Counters          []CounterSample
}

// BucketNs is the width of the recording's time buckets: its series,
// which share one (Validate). 0 when it has no series.
func (r *Recording) BucketNs() int64 {
	for _, s := range r.Series {
		if s.WidthNs > 0 {
			return s.WidthNs
		}
	}
	return 0
}

// Wall converts a monotonic instant to wall-clock time using the start and
// end clock pairs (linear between them, so a clock step during the trace is
// spread instead of jumping).
func (m Meta) Wall(monoNs int64) time.Time {
	s, e := m.Start, m.End
	if e.MonoNs <= s.MonoNs || e.Wall.IsZero() {
		return s.Wall.Add(time.Duration(monoNs - s.MonoNs))
	}
	span := float64(e.MonoNs - s.MonoNs)
	// Round(0) drops the monotonic reading a live time.Time carries and a
	// decoded one lacks, so a recording read back converts as it did live.
	wallSpan := float64(e.Wall.Round(0).Sub(s.Wall.Round(0)))
	off := float64(monoNs-s.MonoNs) * wallSpan / span
	return s.Wall.Add(time.Duration(off))
}

// Offset is the time since the start of the trace.
func (m Meta) Offset(monoNs int64) time.Duration {
	return time.Duration(monoNs - m.Start.MonoNs)
}
