//go:build linux

// Package capture runs one trace: it attaches the datapath to the traced
// interfaces, drains it and samples their NIC counters on timers, detaches
// on every exit path, and returns the recording.
package capture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/owner"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
)

// Config is one trace's settings.
type Config struct {
	Interfaces []string
	Duration   time.Duration // 0: until ctx ends
	Datapath   loader.Options
	Attach     loader.AttachMode
	// SampleInterval is the NIC counter sample interval.
	SampleInterval time.Duration
	// CounterRefresh is the device's counter refresh as the user gave it
	// (--counter-refresh), 0 or less unknown: the sampler reads where its
	// changes are due from the first on (ena.Sampler.SetRefresh).
	CounterRefresh time.Duration
	// CounterSources overrides, per interface, where counters come from
	// (a counters file, the lab). Interfaces not in it get the ENA ethtool
	// reader when their driver is ena, and no counters otherwise.
	CounterSources map[string]ena.Source
	// DrainInterval is how often buckets, size slices and events are read;
	// FlowInterval how often the flow tables are snapshotted (the resolution of
	// per-flow throughput).
	DrainInterval time.Duration
	FlowInterval  time.Duration
	// Meta fields the caller knows (version, instance type, flow limit).
	Meta record.Meta
	// Progress, when set, is called about every 200 ms and at the end.
	Progress func(Progress)
	// Attached, when set, is called once the programs are attached: the
	// moment traffic starts being counted.
	Attached func()
	// AnchorInterval is how often the trace checks that its programs still
	// run first on their hooks (a CNI may attach ahead of them).
	AnchorInterval time.Duration
	// Notice, when set, is told at once what the attachment did beyond the
	// ordinary: orphans of killed runs removed, a move back to the head.
	Notice func(msg string)
	// NoOwners turns owner attribution off: no cgroup programs, no origin
	// noted per flow, Recording.Owners empty. OwnerSockets bounds the owner
	// map (0: loader.DefaultSockets).
	NoOwners     bool
	OwnerSockets uint32
	// Stream, when set, hands what is gathered to a long-running reader as
	// it comes, and the trace keeps none of it: its recording then holds
	// only the metadata, totals and loss.
	Stream *Stream
	// SampleBackoff lengthens the counter sample interval while reads are
	// slow, and backs off or stops reading on signs of a struggling device
	// (ena.Backoff, its Guard); the zero value keeps it fixed.
	SampleBackoff ena.Backoff
}

// NoOwnersNote is the recording's owner note when owners were turned off.
const NoOwnersNote = "owners: not looked for (turned off)"

// Stream receives a trace's data as it is gathered. Its functions run on
// the trace's goroutines (Sample on each interface's sampler) and should
// return quickly.
type Stream struct {
	// Meta is called once the programs are attached, with the metadata of
	// the recording (Start set, End not).
	Meta func(record.Meta)
	// Data is called after every drain with what one interface's collector
	// gathered since the last call.
	Data func(iface string, r loader.Result)
	// Sample is called with every counter read.
	Sample func(record.CounterSample)
	// Health is called about every HealthInterval per interface.
	Health func(iface string, h Health)
	// HealthInterval defaults to 1 s.
	HealthInterval time.Duration
	// ForgetFlowsAfter is how long the collectors remember a flow that
	// left the flow table (loader.Collector.PruneFlows); 0 keeps them all.
	ForgetFlowsAfter time.Duration
	// Owners, when owners are looked for (not Config.NoOwners), is called
	// once before Meta with the trace's owner session: the reader resolves
	// the origins it kept (loader.Result.Origins) when it needs owners. The
	// trace ticks the session every second and closes it when it ends.
	Owners func(*owner.Session)
}

// Health is the state of one interface's probe.
type Health struct {
	loader.Health
	// SampleInterval is the counter read interval in use (0: no counters).
	SampleInterval time.Duration
	// Guarded is what the counter reads' guard did so far.
	Guarded ena.GuardStatus
}

// Progress is what a live status line shows.
type Progress struct {
	Elapsed      time.Duration
	Remaining    time.Duration // 0 when open-ended
	Packets      uint64        // both directions, every interface
	Bytes        uint64
	CounterJumps int // allowance counter increases seen so far
}

// DefaultConfig holds the defaults the CLI documents.
func DefaultConfig() Config {
	return Config{
		Duration:       30 * time.Second,
		Datapath:       loader.DefaultOptions(),
		Attach:         loader.AttachAuto,
		SampleInterval: ena.DefaultInterval,
		SampleBackoff:  ena.Backoff{Guard: ena.DefaultGuard},
		DrainInterval:  50 * time.Millisecond,
		FlowInterval:   100 * time.Millisecond,
		AnchorInterval: 250 * time.Millisecond,
	}
}

// HeavyWindowBytes is the window-event threshold (loader.Options.HeavyBytes):
// share of what a flow at the per-flow cap moves in one fine window, never
// below one full-size packet (1500 bytes).
func HeavyWindowBytes(flowLimitBps, share float64, window time.Duration) uint64 {
	return max(uint64(flowLimitBps/8*window.Seconds()*share), 1500)
}

// tracedInterface is one interface's datapath, collector and counters.
type tracedInterface struct {
	info    record.InterfaceInfo
	probe   *loader.Probe
	col     *loader.Collector
	att     *loader.Attachment
	sampler *ena.Sampler
	closer  func() error // the counter source's, when it has one
	mode    loader.AttachMode

	notes       []string // about the attachment, kept after it is closed
	seen        int      // of the attachment's notes, passed on
	checkFailed bool

	stream *Stream // when set, samples go there instead of samples

	mu      sync.Mutex
	samples []record.CounterSample
	last    *record.CounterSample // the last read, when streaming
	jumps   int
}

// Run traces until cfg.Duration has passed or ctx ends, whichever is first.
// Ending through ctx (Ctrl-C) is not an error: the recording is returned.
// An error after the programs were attached comes with the recording of
// what ran; before, with none.
func Run(ctx context.Context, cfg Config) (rec *record.Recording, err error) {
	if len(cfg.Interfaces) == 0 {
		return nil, errors.New("no interface to trace")
	}
	if err := CheckCapabilities(); err != nil {
		return nil, err
	}
	var traced []*tracedInterface
	defer func() {
		for _, ti := range traced {
			err = errors.Join(err, ti.close())
		}
	}()
	cfg.Datapath.NoOrigins = cfg.NoOwners
	for _, name := range cfg.Interfaces {
		ti, err := setUp(cfg, name)
		if ti != nil {
			traced = append(traced, ti)
		}
		if err != nil {
			return nil, err
		}
	}

	// Loading parsed the object and the kernel's BTF: tens of MiB of
	// garbage. Collect it now, not during the first seconds of the trace,
	// and hand it back to the system for the rest of the run.
	debug.FreeOSMemory()

	// The cgroup programs first: sockets created as the trace starts are
	// seen. Without them the trace runs on, and the report says why its
	// flows are named less precisely.
	var owners *owner.Session
	if !cfg.NoOwners {
		var startErr error
		owners, startErr = owner.StartSession(cfg.OwnerSockets)
		if startErr != nil {
			cfg.notice(fmt.Sprintf("owners: %v", startErr))
		}
		defer func() { err = errors.Join(err, owners.Close()) }()
		if cfg.Stream != nil && cfg.Stream.Owners != nil {
			cfg.Stream.Owners(owners)
		}
	}

	start := clockPair()
	for _, ti := range traced {
		a, err := loader.Attach(ti.probe, ti.info.Name, cfg.Attach)
		if err != nil {
			return nil, err
		}
		ti.att, ti.mode = a, a.Mode
		for _, m := range a.Orphans.Removed() {
			cfg.notice(m)
		}
		ti.notify(cfg)
	}
	if cfg.Stream != nil && cfg.Stream.Meta != nil {
		cfg.Stream.Meta(assemble(cfg, traced, start, record.ClockPair{}).Meta)
	}
	if cfg.Attached != nil {
		cfg.Attached()
	}

	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ti := range traced {
		if ti.sampler == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ti.sampler.Run(sampleCtx, ti.addSample)
		}()
	}
	stopSamplers := func() {
		stopSampling()
		wg.Wait()
	}
	defer stopSamplers() // on error paths; a no-op after the first call

	// From here on the trace has run: whatever fails, what was counted is
	// returned with the error, so that its report is still written.
	var errs []error
	if err := loop(ctx, cfg, traced, owners, start.MonoNs); err != nil {
		errs = append(errs, err)
	}
	// Detach first so the final drain sees every bucket complete.
	for _, ti := range traced {
		ti.notify(cfg)
		if err := ti.att.Close(); err != nil {
			errs = append(errs, err)
			continue
		}
		ti.att = nil
	}
	stopSamplers()
	end := clockPair()
	for _, ti := range traced {
		if err := ti.col.Finish(end.MonoNs); err != nil {
			errs = append(errs, err)
		}
		ti.stream.take(ti)
	}
	rec = assemble(cfg, traced, start, end)
	switch {
	case cfg.NoOwners:
		rec.Meta.OwnerNotes = []string{NoOwnersNote}
	case cfg.Stream == nil: // a streaming trace's reader resolves what it kept
		var origins []loader.FlowOrigin
		for _, ti := range traced {
			origins = append(origins, ti.col.Origins()...)
		}
		var oerr error
		rec.Owners, rec.Meta.OwnerNotes, oerr = owners.Resolve(origins, true)
		if oerr != nil {
			errs = append(errs, oerr)
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(progress(traced, end.MonoNs-start.MonoNs, 0))
	}
	return rec, errors.Join(errs...)
}

func setUp(cfg Config, name string) (*tracedInterface, error) {
	info, err := ena.DescribeInterface(name)
	if err != nil {
		// Interfaces without ethtool driver info (lo, some tunnels) can
		// still be traced.
		info = record.InterfaceInfo{Name: name}
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("describe interface %s: %w", name, err)
		}
	}
	if ifc, err := net.InterfaceByName(name); err == nil && ifc.Flags&net.FlagUp == 0 {
		info.Down = true
	}
	ti := &tracedInterface{info: info, stream: cfg.Stream}
	ti.probe, err = loader.Load(cfg.Datapath)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	ti.col, err = loader.NewCollector(ti.probe, name, monoclock.Now())
	if err != nil {
		return ti, err
	}
	if cfg.Stream != nil && !cfg.NoOwners {
		ti.col.StreamOrigins()
	}

	src, ok := cfg.CounterSources[name]
	if !ok && info.ENA {
		es, err := ena.NewEthtoolSource(name)
		if err != nil {
			return ti, fmt.Errorf("open ENA counters of %s: %w", name, err)
		}
		src, ti.closer = es, es.Close
	}
	if src != nil {
		ti.info.ENA = true
		ti.sampler, err = ena.NewSampler(name, src, cfg.SampleInterval)
		if err != nil {
			return ti, err
		}
		ti.sampler.SetBackoff(cfg.SampleBackoff)
		ti.sampler.SetRefresh(cfg.CounterRefresh)
	}
	return ti, nil
}

// notify passes on the attachment's new notes.
func (ti *tracedInterface) notify(cfg Config) {
	notes := ti.att.Notes()
	for _, n := range notes[min(ti.seen, len(notes)):] {
		ti.notes = append(ti.notes, n)
		cfg.notice(n)
	}
	ti.seen = len(notes)
}

func (cfg Config) notice(msg string) {
	if cfg.Notice != nil {
		cfg.Notice(msg)
	}
}

func (ti *tracedInterface) addSample(s record.CounterSample) {
	ti.mu.Lock()
	prev := ti.last
	if n := len(ti.samples); n > 0 {
		prev = &ti.samples[n-1]
	}
	if prev != nil && s.Err == "" {
		for _, name := range allowanceCounters {
			if v, ok := s.Values[name]; ok && v > prev.Values[name] && prev.Err == "" {
				ti.jumps++
			}
		}
	}
	if ti.stream != nil {
		ti.last = &s
		ti.mu.Unlock()
		if ti.stream.Sample != nil {
			ti.stream.Sample(s)
		}
		return
	}
	ti.samples = append(ti.samples, s)
	ti.mu.Unlock()
}

var allowanceCounters = []string{
	"bw_in_allowance_exceeded", "bw_out_allowance_exceeded", "pps_allowance_exceeded",
	"conntrack_allowance_exceeded", "linklocal_allowance_exceeded",
}

// take hands what ti's collector gathered to the stream, when there is one.
func (st *Stream) take(ti *tracedInterface) {
	if st == nil {
		return
	}
	r := ti.col.Take()
	if st.Data != nil {
		st.Data(ti.info.Name, r)
	}
}

func (ti *tracedInterface) close() error {
	var errs []error
	if ti.att != nil {
		errs = append(errs, ti.att.Close())
	}
	if ti.col != nil {
		errs = append(errs, ti.col.Close())
	}
	if ti.probe != nil {
		errs = append(errs, ti.probe.Close())
	}
	if ti.closer != nil {
		errs = append(errs, ti.closer())
	}
	return errors.Join(errs...)
}

// loop drains on timers until the duration is over or ctx ends.
func loop(ctx context.Context, cfg Config, traced []*tracedInterface, owners *owner.Session, startNs int64) error {
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	drain := time.NewTicker(cfg.DrainInterval)
	defer drain.Stop()
	flows := time.NewTicker(cfg.FlowInterval)
	defer flows.Stop()
	status := time.NewTicker(200 * time.Millisecond)
	defer status.Stop()
	anchor := time.NewTicker(cmp.Or(cfg.AnchorInterval, time.Second))
	defer anchor.Stop()
	// The owner session is ticked every second (owner.Session.Tick).
	ownerTick := time.NewTicker(time.Second)
	defer ownerTick.Stop()
	var healthC <-chan time.Time
	if cfg.Stream != nil && cfg.Stream.Health != nil {
		health := time.NewTicker(cmp.Or(cfg.Stream.HealthInterval, time.Second))
		defer health.Stop()
		healthC = health.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline:
			return nil
		case <-drain.C:
			now := monoclock.Now()
			for _, ti := range traced {
				if err := ti.col.Drain(now, false); err != nil {
					return err
				}
				cfg.Stream.take(ti)
			}
		case <-healthC:
			now := monoclock.Now()
			for _, ti := range traced {
				h := Health{Health: ti.col.Health(now)}
				if ti.sampler != nil {
					h.SampleInterval = ti.sampler.Current()
					h.Guarded = ti.sampler.Guarded()
				}
				if d := cfg.Stream.ForgetFlowsAfter; d > 0 {
					ti.col.PruneFlows(now - int64(d))
				}
				cfg.Stream.Health(ti.info.Name, h)
			}
		case <-flows.C:
			now := monoclock.Now()
			for _, ti := range traced {
				if err := ti.col.SnapshotFlows(now); err != nil {
					return err
				}
			}
		case <-anchor.C:
			// A CNI that attached ahead of us: move back to the head. A
			// failed check never ends the trace; it is noted once.
			for _, ti := range traced {
				if err := ti.att.Check(); err != nil && !ti.checkFailed {
					ti.checkFailed = true
					msg := fmt.Sprintf("%s: could not check that enaprobe runs first: %v", ti.info.Name, err)
					ti.notes = append(ti.notes, msg)
					cfg.notice(msg)
				}
				ti.notify(cfg)
			}
		case <-ownerTick.C:
			if owners != nil {
				owners.Tick()
			}
		case <-status.C:
			if cfg.Progress != nil {
				elapsed := time.Duration(monoclock.Now() - startNs)
				var remaining time.Duration
				if cfg.Duration > 0 {
					remaining = max(cfg.Duration-elapsed, 0)
				}
				cfg.Progress(progress(traced, int64(elapsed), remaining))
			}
		}
	}
}

func progress(traced []*tracedInterface, elapsedNs int64, remaining time.Duration) Progress {
	p := Progress{Elapsed: time.Duration(elapsedNs), Remaining: remaining}
	for _, ti := range traced {
		for _, t := range ti.col.Totals() {
			p.Packets += t.SumPackets()
			p.Bytes += t.SumBytes()
		}
		ti.mu.Lock()
		p.CounterJumps += ti.jumps
		ti.mu.Unlock()
	}
	return p
}

func assemble(cfg Config, traced []*tracedInterface, start, end record.ClockPair) *record.Recording {
	rec := &record.Recording{Meta: cfg.Meta}
	m := &rec.Meta
	m.Start, m.End = start, end
	m.WindowNs = int64(cfg.Datapath.Window)
	m.SliceNs = int64(cfg.Datapath.Slice)
	m.HeavyBytes = cfg.Datapath.HeavyBytes
	m.SampleNs = int64(cfg.SampleInterval)
	m.VPCResolver = cfg.Datapath.VPCResolver
	if m.Kernel == "" {
		m.Kernel = kernelRelease()
	}
	if m.Hostname == "" {
		m.Hostname, _ = os.Hostname()
	}
	m.CounterSource = "none"
	for _, ti := range traced {
		m.Interfaces = append(m.Interfaces, ti.info)
		m.AttachMode = string(ti.mode)
		m.AttachNotes = append(m.AttachNotes, ti.notes...)
		m.BucketMode = ti.probe.Options().Buckets.String()
		m.Impact = !ti.probe.Options().NoImpact
		r := ti.col.Result()
		rec.Series = append(rec.Series, r.Series...)
		rec.Sizes = append(rec.Sizes, r.Sizes...)
		rec.Flows = append(rec.Flows, r.Flows...)
		rec.Windows = append(rec.Windows, r.Windows...)
		rec.IMDS = append(rec.IMDS, r.IMDS...)
		rec.LinkLocalPayloads = append(rec.LinkLocalPayloads, r.LinkLocalPayloads...)
		rec.Totals = append(rec.Totals, r.Totals...)
		rec.Loss = append(rec.Loss, r.Loss)
		ti.mu.Lock()
		rec.Counters = append(rec.Counters, ti.samples...)
		ti.mu.Unlock()
		if ti.sampler != nil {
			m.CounterSource = counterSourceName(cfg, ti.info.Name)
			m.CounterGuard = append(m.CounterGuard, ti.sampler.Guarded().Events...)
		}
	}
	return rec
}

func counterSourceName(cfg Config, iface string) string {
	if s, ok := cfg.CounterSources[iface]; ok {
		return s.Kind()
	}
	return "ethtool"
}

// clockPair reads the monotonic and the wall clock back to back.
func clockPair() record.ClockPair {
	return record.ClockPair{MonoNs: monoclock.Now(), Wall: time.Now()}
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
