//go:build linux

// Package catalog is the lab's catalogue of scenarios. It reproduces EC2 network limits in the lab: each scenario
// brings a lab up, traces its instance interface with the lab's emulated
// allowance counters, drives traffic, and returns the recording with the
// truth the traffic generators know, so tests and users can check that the
// report finds what happened.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Scenario is one reproducible situation.
type Scenario struct {
	Name    string
	Summary string
	// Expect is what the report should show, for people.
	Expect string
	// Lab returns the lab's allowances.
	Lab func() lab.Config
	// Drive makes the traffic once the trace is attached; it returns what
	// it knows about what it did.
	Drive func(ctx context.Context, l *lab.Lab) (Truth, error)
	// CounterLag makes the lab's counters show a drop this long after it
	// happened, as an ENA device's can (0: at once, read as the trace
	// samples). With a lag, the kernel counters are polled back to back
	// and a trace can sample them every SampleInterval.
	CounterLag time.Duration
	// CounterRefresh makes the lab's counters change only on refresh
	// boundaries this far apart, at a random phase (0: at every poll), as
	// a device may publish its counters only every so often.
	CounterRefresh time.Duration
	// SampleInterval is the counter read interval the scenario is meant
	// to be traced with (0: the caller's choice); Run takes cfg's.
	SampleInterval time.Duration
}

// Truth is what the traffic generators know, to compare a report with.
type Truth struct {
	// Culprit is the flow (source) the expected finding should name first.
	Culprit netip.AddrPort
	// Bursts are the deliberate bursts, each from its own socket.
	Bursts []Burst
	// Incidents are when the allowance dropped packets, first to last
	// drop, by what the generators recorded (Src: the culprit).
	Incidents []Burst
	// CounterAgeMaxNs is, with lagged counters, the most a read showed a
	// drop late (the lag, and the age of the poll it read).
	CounterAgeMaxNs int64
	// Impact scenarios: the TCP victim's two ends (Victim the instance's
	// or its container's), the kernel's TcpRetransSegs delta over the
	// traffic in the instance (or its container) and at the peer (the VPC
	// namespace, or the remote host sending), and the most the lab's
	// delay probe saw its round trip rise once the burst began.
	Victim, VictimPeer           netip.AddrPort
	RetransSegs, PeerRetransSegs uint64
	// LossProbes and PeerLossProbes are the tail loss probes among them
	// (TcpExt TCPLossProbes): sent when ACKs are late, loss or not.
	LossProbes, PeerLossProbes uint64
	QueueDelay                 time.Duration
	// PeerSackRecoveries are the times the peer went into recovery on
	// the SACKs of the receiver, which had data past a hole (TcpExt
	// TCPSackRecovery); none with segments sent again is a lost tail
	// sent again after a timeout, whose copies the receiver's wire
	// cannot tell from new data.
	PeerSackRecoveries uint64
	// PeerReorders are the times the peer saw its segments arrive out of
	// order (lab.TCPCounts.Reorders): each at least one segment the
	// receiver's wire saw end below the highest without its being sent
	// again.
	PeerReorders uint64
	// VictimPeakGap is how far from the queue's peak (the probe that
	// waited longest, sent) the victim's nearest write was, an upload
	// paced by the application only (-1 for another victim, unset outside
	// the impact scenarios): a victim that was not sending then met a
	// shorter queue than the probe did.
	VictimPeakGap time.Duration
	// CounterLagNs is, with lagged counters, how late they showed a drop
	// on average, refresh aside: the lag the scenario asked for, plus the
	// poll's duration and half the polls' spacing (lab.LaggedCounters
	// MeanDelay). CounterRefreshNs is the refresh they were published at.
	CounterLagNs, CounterRefreshNs int64
	// CounterJumps is, with lagged counters, every change a read of them
	// showed, with how old the value was where it became visible: the lag
	// each jump had, per jump (JumpAges).
	CounterJumps []lab.ShownJump `json:",omitempty"`
	Notes        []string
	// LinkLocal is what a link-local client asked, for the link-local
	// detail of the finding.
	LinkLocal *LinkLocalTruth
}

// LinkLocalTruth is what a link-local generator asked and got.
type LinkLocalTruth struct {
	// Fix is the kind of fix the detail should rank first (search_path,
	// imds_token, ntp_poll).
	Fix string
	// DNS: the name looked up, the search list, the ndots, and the
	// answers NXDOMAIN of all answers the client got.
	Base          string
	Search        []string
	NDots         int
	NXDomainShare float64
	// IMDS: the credentials path, token requests per GET, and the GETs
	// the client sent (each once, however often TCP sent it).
	CredentialsPath string
	TokensPerGet    float64
	GETs            int64
	// NTP: when each poll left the client (CLOCK_MONOTONIC).
	NTPSendNs []int64
}

// Burst is one burst as its sender saw it: CLOCK_MONOTONIC just before the
// first packet and just after the last, and the socket it came from.
// PauseNs is the longest one of its sends took (lab.BurstResult): a burst
// whose sender was descheduled came in parts.
type Burst struct {
	StartNs, EndNs int64
	Src            netip.AddrPort
	PauseNs        int64 `json:",omitempty"`
	// FirstSentNs is when the first send of a burst sent from the
	// instance returned (lab.BurstResult), its packet past tc egress: 0
	// for an inbound burst, whose first packet may wait in the shaper
	// before the instance sees it, and in truths written before it was
	// kept.
	FirstSentNs int64 `json:",omitempty"`
	// ShownAfterNs is, with lagged counters, how long after the burst's
	// end they showed its last drop (lab.LaggedCounters ShownAt): the lag
	// of this burst, where CounterLagNs is the run's average.
	ShownAfterNs int64 `json:",omitempty"`
}

// WireStart is when the burst's first packet reached the wire: after
// StartNs, and by FirstSentNs where that was kept. A sender descheduled
// before its first send (beside two CPU-bound processes: 4.6 ms) starts
// the burst that much after StartNs, and a finding then rightly starts
// late.
func (b Burst) WireStart() (fromNs, toNs int64) {
	return b.StartNs, max(b.StartNs, b.FirstSentNs)
}

// JumpAges are the lags of counter's jumps read between fromNs and toNs
// (CLOCK_MONOTONIC), shortest first: those an incident whose jumps they
// are had, where CounterLagNs is the run's mean delay.
func (t Truth) JumpAges(counter string, fromNs, toNs int64) []time.Duration {
	var ages []time.Duration
	for _, j := range t.CounterJumps {
		if j.Counter == counter && j.ReadNs >= fromNs && j.ReadNs <= toNs {
			ages = append(ages, time.Duration(j.AgeNs))
		}
	}
	slices.Sort(ages)
	return ages
}

// Outcome is a finished scenario.
type Outcome struct {
	Recording *record.Recording
	Truth     Truth
	// Analysis holds the lab's allowances as analyzer options, since the
	// lab is an instance scaled down from any real type.
	Analysis analyzer.Options
	// Interrupted: ctx ended (Ctrl-C) while the traffic ran; the recording
	// holds what ran until then.
	Interrupted bool
}

// All lists the scenarios by name.
func All() []Scenario {
	s := []Scenario{microBurst(), flowAtCap(), linkLocal(), linkLocalMild(), ppsOvershoot(), connFlood(), clean(), imdsHopLimit(),
		impactShallow(), impactDeep(), impactInbound(), dnsSearchPath(), imdsCredentialStorm(), ntpChatty()}
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	return s
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names lists the scenario names.
func Names() []string {
	var n []string
	for _, s := range All() {
		n = append(n, s.Name)
	}
	return n
}

// Run brings the lab up, traces its instance interface while Drive runs,
// and tears everything down. cfg carries the trace settings (bucket, window,
// sample interval, meta); interfaces and counter sources are the lab's.
func Run(ctx context.Context, s Scenario, cfg capture.Config) (out *Outcome, err error) {
	lcfg := s.Lab()
	l, err := lab.Up(ctx, lcfg)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	lcfg = l.Config()

	iface := l.InstanceInterface()
	cfg.Interfaces = []string{iface}
	cfg.CounterSources = map[string]ena.Source{iface: l.Counters()}
	var lagged *lab.LaggedCounters
	if s.CounterLag > 0 || s.CounterRefresh > 0 {
		if lagged, err = l.LaggedCounters(s.CounterLag, s.CounterRefresh); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		defer func() { err = errors.Join(err, lagged.Close()) }()
		cfg.CounterSources[iface] = lagged
	}

	cfg.Duration = 0 // until Drive is done
	if cfg.Meta.InstanceType == "" {
		cfg.Meta.InstanceType = "lab"
	}
	cfg.Meta.FlowLimitBps = float64(lcfg.FlowRate)
	cfg.Datapath.HeavyBytes = capture.HeavyWindowBytes(float64(lcfg.FlowRate), 0.5, cfg.Datapath.Window)

	traceCtx, stopTrace := context.WithCancel(ctx)
	defer stopTrace()
	attached := make(chan struct{})
	userAttached := cfg.Attached
	cfg.Attached = func() {
		if userAttached != nil {
			userAttached()
		}
		close(attached)
	}
	var rec *record.Recording
	var traceErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		traceErr = l.InInstance(func() error {
			var err error
			rec, err = capture.Run(traceCtx, cfg)
			return err
		})
		if traceErr != nil {
			select {
			case <-attached:
			default:
				close(attached) // unblock the wait below
			}
		}
	}()
	select {
	case <-attached:
	case <-ctx.Done():
		stopTrace()
		wg.Wait()
		return nil, ctx.Err()
	}
	if traceErr != nil {
		wg.Wait()
		return nil, traceErr
	}

	// A quiet lead-in and tail, so findings are not at the trace's edges.
	time.Sleep(300 * time.Millisecond)
	truth, driveErr := s.Drive(ctx, l)
	interrupted := ctx.Err() != nil
	if !interrupted {
		// The tail also lets lagged counters show the last drop: a trace
		// that ends before they do has an incident without its end (the
		// lab's pps-overshoot behind a 1 s refresh lost its last jump).
		tail := 300 * time.Millisecond
		if lagged != nil {
			tail += s.CounterLag + s.CounterRefresh
		}
		select {
		case <-time.After(tail):
		case <-ctx.Done():
		}
	}
	stopTrace()
	wg.Wait()
	if interrupted && traceErr == nil && rec != nil {
		// Ctrl-C ends the scenario early, as it ends a trace: what ran is
		// reported, whatever the traffic generators made of the cancel.
		truth.Notes = append(truth.Notes, "interrupted: the traffic was stopped early")
		driveErr = nil
	}
	if driveErr != nil {
		return nil, fmt.Errorf("scenario %s: drive traffic: %w", s.Name, driveErr)
	}
	if traceErr != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, traceErr)
	}
	if lagged != nil {
		truth.CounterAgeMaxNs = int64(lagged.MaxAge())
		truth.CounterLagNs, truth.CounterRefreshNs = int64(lagged.MeanDelay()), int64(lagged.Refresh())
		truth.CounterJumps = lagged.Jumps()
		for i := range truth.Bursts {
			if at, ok := lagged.ShownAt(truth.Bursts[i].EndNs); ok {
				truth.Bursts[i].ShownAfterNs = at - truth.Bursts[i].EndNs
			}
		}
	}
	opts := analyzer.DefaultOptions()
	opts.InstanceType = cfg.Meta.InstanceType
	// Findings are located with the window the datapath was given, as a
	// trace's are.
	opts.FineWindow = cfg.Datapath.Window
	opts.BaselineBps = float64(lcfg.OutRate)
	opts.BurstBps = float64(max(lcfg.OutPeakRate, lcfg.OutRate))
	opts.FlowLimitBps = float64(lcfg.FlowRate)
	opts.LinkLocalPPS = float64(lcfg.LinkLocalPPS)
	opts.PPSAllowance = float64(lcfg.PPS)
	opts.Sources = analyzer.LimitSources{InstanceType: "lab", Baseline: "lab", Burst: "lab", FlowLimit: "lab",
		LinkLocal: "lab", PPSAllowance: "lab"}
	return &Outcome{Recording: rec, Truth: truth, Analysis: opts, Interrupted: interrupted}, nil
}

// WithoutAllowances is the analysis as it would run on an instance whose
// allowances nobody published: the lab's bandwidth and packets/s
// allowances unknown, to be found from the traffic and learned from the
// counters (the link-local limit, documented, and the per-flow cap stay).
func (o *Outcome) WithoutAllowances() analyzer.Options {
	opts := o.Analysis
	opts.BaselineBps, opts.BurstBps, opts.PPSAllowance = 0, 0, 0
	opts.Sources.Baseline, opts.Sources.Burst, opts.Sources.PPSAllowance = "", "", ""
	return opts
}
