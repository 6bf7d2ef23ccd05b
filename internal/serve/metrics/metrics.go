// Package metrics owns the Prometheus metrics `enaprobe serve` exports: their
// names, help, labels and registration. It is the one home of the names, so
// the dashboards and alert rules in deploy/ are checked against it (Gather on
// a registry from New lists every family, without running serve).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"regexp"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/upload"
)

// Namespace prefixes every metric name.
const Namespace = "enaprobe"

// Label values of the allowance label: the five *_allowance_exceeded
// counters of the ENA driver, without the suffix.
const (
	AllowanceBwIn      = "bw_in"
	AllowanceBwOut     = "bw_out"
	AllowancePPS       = "pps"
	AllowanceConntrack = "conntrack"
	AllowanceLinklocal = "linklocal"
)

// Allowances lists the allowance label values.
var Allowances = []string{AllowanceBwIn, AllowanceBwOut, AllowancePPS, AllowanceConntrack, AllowanceLinklocal}

// Label values of the loss counter's reason label, one per field of
// record.Loss.
const (
	LossFlowMapFull       = "flow_map_full"
	LossRingbufFull       = "ringbuf_full"
	LossBucketOverwritten = "bucket_overwritten"
	LossSliceOverwritten  = "slice_overwritten"
	LossFlowsEvicted      = "flows_evicted"
	LossIMDSEvents        = "imds_events"
	LossLinkLocalPayloads = "linklocal_payloads"
)

// LossReasons lists the reason label values.
var LossReasons = []string{LossFlowMapFull, LossRingbufFull, LossBucketOverwritten, LossSliceOverwritten, LossFlowsEvicted, LossIMDSEvents, LossLinkLocalPayloads}

// FindingKinds lists the finding kinds of the kind label: every kind the
// analyzer has, so each series exists from the first scrape.
var FindingKinds = analyzer.Kinds

// SkippedMinGap is the reason label of an incident within --min-gap.
const SkippedMinGap = "min_gap"

// PeakWindow is the window label of the peak rate.
const PeakWindow = "1ms"

// Metrics are the metrics serve updates.
type Metrics struct {
	Registry *prometheus.Registry

	AllowanceExceeded           *prometheus.CounterVec // interface, allowance
	ConntrackAllowanceAvailable *prometheus.GaugeVec   // interface
	Packets                     *prometheus.CounterVec // interface, direction
	Bytes                       *prometheus.CounterVec // interface, direction
	SYNs                        *prometheus.CounterVec // interface, direction
	LinklocalPackets            *prometheus.CounterVec // interface, service
	Findings                    *prometheus.CounterVec // interface, kind
	BundlesWritten              prometheus.Counter
	BundleErrors                prometheus.Counter
	BundlesSkipped              *prometheus.CounterVec // reason
	BundlesRemoved              prometheus.Counter
	BundleUploads               *prometheus.CounterVec // result
	PeakBitsPerSecond           *prometheus.GaugeVec   // interface, direction, window

	Lost                 *prometheus.CounterVec   // interface, reason
	FlowTableFill        *prometheus.GaugeVec     // interface: used/capacity
	RingUse              *prometheus.GaugeVec     // interface: bucket ring lag/slots
	CounterReadSeconds   *prometheus.HistogramVec // interface
	CounterReadErrors    *prometheus.CounterVec   // interface
	CounterReadInterval  prometheus.Gauge         // seconds
	CounterReadGuard     *prometheus.GaugeVec     // interface: ReadGuard*
	CounterReadSigns     *prometheus.CounterVec   // interface
	RecorderRingBytes    prometheus.Gauge         // bytes held
	RecorderRingCapacity prometheus.Gauge         // bytes at most
	RecorderHistory      prometheus.Gauge         // seconds kept
	RecorderDropped      prometheus.Counter
	OriginsDropped       prometheus.Counter
	Attached             *prometheus.GaugeVec // interface
}

// Names lists the family names New registers (besides the Go and process
// collectors' go_* and process_*).
func Names() []string {
	out := make([]string, 0, 24)
	for _, d := range descs {
		out = append(out, Namespace+"_"+d.name)
	}
	return out
}

type desc struct{ name, help string }

// descs is the one list of names and help texts.
var descs = map[string]desc{
	"allowance": {"allowance_exceeded_total", "Packets the ENA device queued or dropped because an allowance was exceeded (the driver's *_allowance_exceeded counters; driver resets handled)."},
	"conntrack": {"conntrack_allowance_available", "Connections the instance can still open before reaching its conntrack allowance (ENA conntrack_allowance_available)."},
	"packets":   {"packets_total", "Wire packets seen on tc ingress/egress."},
	"bytes":     {"bytes_total", "Wire bytes (layer 3) seen on tc ingress/egress."},
	"syns":      {"syns_total", "TCP SYNs without ACK: new connection attempts."},
	"linklocal": {"linklocal_packets_total", "Packets to or from the link-local services (imds, dns, ntp), which share 1024 packets/s per interface."},
	"findings":  {"findings_total", "Findings of the analysis of each bundle written, by kind."},
	"bundles":   {"bundles_written_total", "Bundles the flight recorder wrote."},
	"bundleerr": {"bundle_errors_total", "Bundles the flight recorder failed to write."},
	"skipped":   {"bundles_skipped_total", "Bundles not written, by reason (min_gap: within --min-gap of the last one)."},
	"removed":   {"bundles_removed_total", "Old bundles removed to stay within --max-bundles and --max-bytes."},
	"uploads":   {"bundle_uploads_total", "Bundle upload attempts to --upload, by result (uploaded, skipped: already there, retried, failed: given up, the bundle stays on disk)."},
	"dropped":   {"recorder_dropped_total", "Recorder chunks dropped before they left --history, to stay within the recorder's memory bound."},
	"origins":   {"owner_origins_dropped_total", "Flows whose origin (socket or ingress interface) the agent did not keep, over its bound: a bundle names no owner for them."},
	"peak":      {"peak_bits_per_second", "Highest 1 ms rate since the previous scrape: what a 1-minute average hides."},
	"lost":      {"lost_total", "What the probe could not record, by reason (never silent)."},
	"flowfill":  {"flow_table_fill_ratio", "Share of the flow table's slots in use at the last read."},
	"ringuse":   {"bucket_ring_use_ratio", "Share of the bucket ring the collector was behind at the last drain (1 means buckets are overwritten before read)."},
	"readsec":   {"ena_read_duration_seconds", "Time one ENA counter read (ethtool -S: one admin command to the device) took."},
	"readerr":   {"ena_read_errors_total", "ENA counter reads that failed."},
	"interval":  {"ena_read_interval_seconds", "ENA counter read interval in use (raised when reads slow down)."},
	"guard":     {"ena_read_guard_state", "ENA counter reads: 0 reading, 1 backed off, 2 stopped, after signs of a struggling device (its health counters moved, reads slowed down). The reads' time under the RTNL lock in all is ena_read_duration_seconds_sum."},
	"signs":     {"ena_read_guard_signs_total", "Signs of a struggling device seen in ENA counter reads (health counters moved, a read over 50 ms, a slow median); each backed reads off, the third stopped them."},
	"ringbytes": {"recorder_ring_bytes", "Memory the flight recorder holds now, estimated."},
	"ringcap":   {"recorder_ring_capacity_bytes", "Memory the flight recorder holds at most."},
	"history":   {"recorder_history_seconds", "How far back the flight recorder keeps buckets, flows and counter samples (--history)."},
	"attached":  {"attached", "1 while the probe is attached to the interface and its counters are read."},
}

// ReadLatencyBuckets are the histogram bounds of a counter read, from a fast
// read (tens of microseconds) to one that slows the agent's cadence.
var ReadLatencyBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1}

// New registers every metric in a new registry, with the Go and process
// collectors, and creates the series of each interface so that every family
// is listed from the first scrape (a counter that has not moved yet is 0,
// not absent); the conntrack gauge only appears once the device reports it.
func New(interfaces []string) *Metrics {
	name := func(k string) string { return Namespace + "_" + descs[k].name }
	help := func(k string) string { return descs[k].help }
	cv := func(k string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name(k), Help: help(k)}, labels)
	}
	gv := func(k string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name(k), Help: help(k)}, labels)
	}
	g := func(k string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name(k), Help: help(k)})
	}
	m := &Metrics{
		Registry:                    prometheus.NewRegistry(),
		AllowanceExceeded:           cv("allowance", "interface", "allowance"),
		ConntrackAllowanceAvailable: gv("conntrack", "interface"),
		Packets:                     cv("packets", "interface", "direction"),
		Bytes:                       cv("bytes", "interface", "direction"),
		SYNs:                        cv("syns", "interface", "direction"),
		LinklocalPackets:            cv("linklocal", "interface", "service"),
		Findings:                    cv("findings", "interface", "kind"),
		BundlesWritten:              prometheus.NewCounter(prometheus.CounterOpts{Name: name("bundles"), Help: help("bundles")}),
		BundleErrors:                prometheus.NewCounter(prometheus.CounterOpts{Name: name("bundleerr"), Help: help("bundleerr")}),
		BundlesSkipped:              cv("skipped", "reason"),
		BundlesRemoved:              prometheus.NewCounter(prometheus.CounterOpts{Name: name("removed"), Help: help("removed")}),
		BundleUploads:               cv("uploads", "result"),
		PeakBitsPerSecond:           gv("peak", "interface", "direction", "window"),
		Lost:                        cv("lost", "interface", "reason"),
		FlowTableFill:               gv("flowfill", "interface"),
		RingUse:                     gv("ringuse", "interface"),
		CounterReadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name("readsec"), Help: help("readsec"), Buckets: ReadLatencyBuckets}, []string{"interface"}),
		CounterReadErrors:    cv("readerr", "interface"),
		CounterReadInterval:  g("interval"),
		CounterReadGuard:     gv("guard", "interface"),
		CounterReadSigns:     cv("signs", "interface"),
		RecorderRingBytes:    g("ringbytes"),
		RecorderRingCapacity: g("ringcap"),
		RecorderHistory:      g("history"),
		RecorderDropped:      prometheus.NewCounter(prometheus.CounterOpts{Name: name("dropped"), Help: help("dropped")}),
		OriginsDropped:       prometheus.NewCounter(prometheus.CounterOpts{Name: name("origins"), Help: help("origins")}),
		Attached:             gv("attached", "interface"),
	}
	m.Registry.MustRegister(
		// The default Go metrics, and go_gc_heap_live_bytes: the heap
		// the last collection found live, which says what the process
		// holds (RSS also holds garbage not yet collected and pages the
		// runtime has not yet returned, and swings with the machine's
		// load; TestServeSoak judges a leak by this).
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.AllowanceExceeded, m.ConntrackAllowanceAvailable, m.Packets, m.Bytes, m.SYNs,
		m.LinklocalPackets, m.Findings, m.BundlesWritten, m.BundleErrors, m.BundlesSkipped, m.BundlesRemoved, m.BundleUploads, m.PeakBitsPerSecond,
		m.Lost, m.FlowTableFill, m.RingUse, m.CounterReadSeconds, m.CounterReadErrors,
		m.CounterReadInterval, m.CounterReadGuard, m.CounterReadSigns, m.RecorderRingBytes, m.RecorderRingCapacity, m.RecorderHistory, m.RecorderDropped, m.OriginsDropped, m.Attached,
	)
	m.BundlesSkipped.WithLabelValues(SkippedMinGap)
	for _, r := range upload.Results {
		m.BundleUploads.WithLabelValues(string(r))
	}
	for _, iface := range interfaces {
		m.addInterface(iface)
	}
	return m
}

// addInterface creates every series of one interface at zero.
func (m *Metrics) addInterface(iface string) {
	for _, a := range Allowances {
		m.AllowanceExceeded.WithLabelValues(iface, a)
	}
	// No conntrack_allowance_available series until the device reports the
	// gauge (driver 2.8.1+, in-tree 6.12+, device permitting): absent is not zero,
	// and a 0 would read as "no connection left".
	for d := range record.NumDirections {
		dir := record.Direction(d).String()
		m.Packets.WithLabelValues(iface, dir)
		m.Bytes.WithLabelValues(iface, dir)
		m.SYNs.WithLabelValues(iface, dir)
		m.PeakBitsPerSecond.WithLabelValues(iface, dir, PeakWindow)
	}
	for _, s := range record.Services {
		m.LinklocalPackets.WithLabelValues(iface, s.String())
	}
	for _, k := range FindingKinds {
		m.Findings.WithLabelValues(iface, k)
	}
	for _, r := range LossReasons {
		m.Lost.WithLabelValues(iface, r)
	}
	m.FlowTableFill.WithLabelValues(iface)
	m.RingUse.WithLabelValues(iface)
	m.CounterReadSeconds.WithLabelValues(iface)
	m.CounterReadErrors.WithLabelValues(iface)
	m.CounterReadGuard.WithLabelValues(iface)
	m.CounterReadSigns.WithLabelValues(iface)
	m.Attached.WithLabelValues(iface)
}

// Values of the ena_read_guard_state gauge.
const (
	ReadGuardReading   = 0
	ReadGuardBackedOff = 1
	ReadGuardStopped   = 2
)
