package analyzer

import (
	"time"

	"github.com/enaprobe/enaprobe/internal/knobs"
	"github.com/enaprobe/enaprobe/internal/limits"
)

// Options are the limits the trace is compared with and the thresholds of
// every detection rule. DefaultOptions documents each default.
type Options struct {
	// BaselineBps and BurstBps are the instance's aggregate bandwidth
	// allowance per direction, sustained and while burst credits last
	// (DescribeInstanceTypes BaselineBandwidthInGbps, PeakBandwidthInGbps).
	// 0 means: look the instance type up in the embedded table of package
	// limits, and unknown if it is not there.
	BaselineBps, BurstBps float64
	// InstanceType overrides the recorded one in the report.
	InstanceType string
	// FlowLimitBps is the per-flow (5-tuple) cap: 5 Gbps outside a cluster
	// placement group, up to 10 Gbps inside one, up to 25 Gbps with ENA
	// Express. 0 means unknown. When the recording carries a value and the
	// option is the default, the recording wins.
	FlowLimitBps float64
	// LinkLocalPPS is the per-interface packet rate allowed to DNS, IMDS and
	// NTP together: 1024, documented as not increasable.
	LinkLocalPPS float64
	// PPSAllowance is the instance's packets/s allowance, both directions
	// together. AWS does not publish it; 0 (unknown) makes pps_exceeded find
	// its window from the packet rate's own level.
	PPSAllowance float64
	// Sources say where the caller took each limit from, for the report
	// ("lab", "imds: placement group x", "table ..."); an empty one is
	// "options" (given by the user). Notes are caveats the caller knows,
	// shown with the trace's own.
	Sources LimitSources
	Notes   []string

	// CounterLag is how far before a counter read the traffic that moved
	// the counter is looked for: a device may make a drop visible some ms
	// after it happened. 0 estimates it per interface and counter
	// (Incident.CounterLagSource), up to MaxCounterLag; NoCounterLag looks
	// only inside the read interval.
	CounterLag time.Duration
	// CounterRefresh is how often the device refreshes what a counter
	// read returns, where the caller knows it (a busier run told it):
	// 0 learns it per interface and counter from the run's changes
	// (Incident.CounterRefreshKnown), RefreshEveryRead says the device
	// shows every change at the next read, and a period up to
	// MaxCounterRefresh is taken as the refresh, its phase learned from
	// the changes. A run whose counter changed once or twice cannot tell
	// it, and a refresh it cannot tell may account for any part of a
	// drop's delay.
	CounterRefresh time.Duration

	// CriticalDrops and CriticalDuration: an incident that dropped at
	// least this many packets, or lasted at least this long, is critical;
	// a shorter, smaller one is a warning.
	CriticalDrops    float64
	CriticalDuration time.Duration
	// IncidentRefill: two link-local jumps are one incident while the
	// traffic between them fell short of the limit, over any stretch, by
	// at most this long at the limit (the most a burst bucket could have
	// refilled): a paced client's pauses do not split an overshoot, a
	// quiet second between two bursts does.
	IncidentRefill time.Duration
	// PeakWindow is the width of an incident's peak sub-window.
	PeakWindow time.Duration

	// FineWindow is the width of the windows findings are located with.
	FineWindow time.Duration

	// StandOutFactor and StandOutPeakShare define a window that "stands out"
	// when no allowance is known: its rate is at least StandOutFactor times
	// the median window of the sample interval and at least
	// StandOutPeakShare of the interval's highest window.
	StandOutFactor    float64
	StandOutPeakShare float64
	// SaturationShare: a fine window at or above this share of a known
	// bandwidth allowance counts as at the allowance. A shaped direction
	// sits just at it (the device drops inbound excess before the host sees
	// it), so a burst is the windows at the allowance, not only those over.
	SaturationShare float64
	// MergeGap joins findings of one kind whose windows are at most this far
	// apart (a burst straddling a counter read is one burst).
	MergeGap time.Duration

	// NearMissShare: fine windows at or above this share of the bandwidth
	// allowance while the bw counter did not move are near-misses, folded
	// into one info finding per interface and direction. MaxNearMisses is
	// how many of their stretches (the highest) its flows are taken from.
	// NearMissMin is the shortest stretch of such windows worth a reader's
	// time: a window or two at the allowance fits in any burst bucket.
	NearMissShare float64
	MaxNearMisses int
	NearMissMin   time.Duration

	// LinkLocalHotShare: a 1 s link-local packet rate at or above this
	// share of LinkLocalPPS with no counter jump is linklocal_hot. The
	// stretch is then placed to the fine window as the one carrying the most
	// above half that rate.
	// LinkLocalShortWindow is the short window of the link-local profile.
	LinkLocalHotShare    float64
	LinkLocalShortWindow time.Duration

	// ConntrackLowShare: conntrack_allowance_available at or below this
	// share of its highest value in the trace is near the limit.
	// ConntrackFallShare and ConntrackFallWindow: a fall of at least this
	// share of the highest value within that window is a steep fall.
	ConntrackLowShare   float64
	ConntrackFallShare  float64
	ConntrackFallWindow time.Duration

	// PlateauMin is the shortest flat stretch that makes a plateau
	// (flow_at_cap and the baseline of baseline_exhausted); PlateauCV is the
	// highest coefficient of variation (stddev/mean of the throughput per
	// drain interval) that is still flat.
	PlateauMin time.Duration
	PlateauCV  float64
	// PlateauBin is the span a flow's throughput is averaged over before
	// its flatness is judged: one drain interval (100 ms) of a TCP flow
	// held by a rate limit swings with its congestion window (a loss, a
	// retransmit, a timer firing late), while the limit shows as a flat
	// rate over seconds, as iperf reports it per second.
	PlateauBin time.Duration
	// FlowCapBand: a plateau whose mean is within this share below
	// FlowLimitBps (or above it by at most the same share, for rounding in
	// the path) sits at the per-flow cap.
	FlowCapBand float64
	// FlowPlateauMinBps is the lowest plateau reported when FlowLimitBps is
	// unknown (info only: flat at its maximum, cap unknown).
	FlowPlateauMinBps float64

	// BaselineBand: a rate within this share of BaselineBps is "about
	// baseline"; BaselineAboveFactor: a rate at least this many times
	// BaselineBps is "above baseline". BaselineBin is the averaging bin of
	// the aggregate rate.
	BaselineBand        float64
	BaselineAboveFactor float64
	BaselineBin         time.Duration

	// TopFlows is how many flows a finding lists, ProfileFlows how many the
	// profile does.
	TopFlows     int
	ProfileFlows int
	// EventCoverage: culprit flows are taken from window events when they
	// carry at least this share of the window's bytes, else from flow
	// snapshots.
	EventCoverage float64

	// Impact (impact.go). ImpactBefore is how long before an incident a
	// flow's srtt gives its level and noise; ImpactTail how long after
	// it retransmissions still count as its (a lost segment is sent again
	// after an RTO of at least 200 ms, doubling); ImpactMinRise the
	// least noise, as a share of the level (a steady srtt still jitters).
	ImpactBefore  time.Duration
	ImpactTail    time.Duration
	ImpactMinRise float64
}

// LimitSources name the origin of each limit of Options.
type LimitSources struct {
	InstanceType, Baseline, Burst, FlowLimit, LinkLocal, PPSAllowance string
}

// MaxCounterLag bounds the estimated counter lag: a device that shows a
// drop later than this, and the read after (lagReach), is not seen as
// lagging but as reporting another event (--counter-lag sets any lag by
// hand).
const MaxCounterLag = time.Second

// NoCounterLag as Options.CounterLag looks for the cause of a counter jump
// only between the two reads around it.
const NoCounterLag time.Duration = -1

// RefreshEveryRead as Options.CounterRefresh says the device shows every
// change at the next read.
const RefreshEveryRead time.Duration = -1

// DefaultOptions returns the documented limits and thresholds.
func DefaultOptions() Options {
	return Options{
		FlowLimitBps:         5e9,
		CriticalDrops:        10000,
		CriticalDuration:     time.Second,
		PeakWindow:           100 * time.Millisecond,
		IncidentRefill:       250 * time.Millisecond,
		LinkLocalPPS:         limits.LinkLocalPPSPerInterface,
		FineWindow:           knobs.DefaultWindow,
		StandOutFactor:       2,
		StandOutPeakShare:    0.5,
		SaturationShare:      0.9,
		MergeGap:             10 * time.Millisecond,
		NearMissShare:        0.9,
		MaxNearMisses:        5,
		NearMissMin:          5 * time.Millisecond,
		LinkLocalHotShare:    0.7,
		LinkLocalShortWindow: 100 * time.Millisecond,
		ConntrackLowShare:    0.2,
		ConntrackFallShare:   0.5,
		ConntrackFallWindow:  10 * time.Second,
		PlateauMin:           3 * time.Second,
		PlateauCV:            0.05,
		PlateauBin:           time.Second,
		FlowCapBand:          0.1,
		FlowPlateauMinBps:    1e9,
		BaselineBand:         0.15,
		BaselineAboveFactor:  1.5,
		BaselineBin:          time.Second,
		TopFlows:             5,
		ProfileFlows:         10,
		EventCoverage:        0.5,
		ImpactBefore:         3 * time.Second,
		ImpactTail:           time.Second,
		ImpactMinRise:        0.1,
	}
}
