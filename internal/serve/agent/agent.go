//go:build linux

// Package agent runs `enaprobe serve`: a streaming trace (capture) feeding
// the flight recorder (flightrec) and the Prometheus metrics (metrics), an
// HTTP server for /metrics, /healthz and POST /snapshot, and the bundles
// written when an allowance counter jumps or on demand.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/owner"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/report"
	"github.com/enaprobe/enaprobe/internal/serve/flightrec"
	"github.com/enaprobe/enaprobe/internal/serve/metrics"
	"github.com/enaprobe/enaprobe/internal/upload"
	"github.com/enaprobe/enaprobe/loader"
)

// Config is one serve run's settings.
type Config struct {
	Capture  capture.Config // Duration 0: until ctx ends
	Analysis analyzer.Options

	Listen    string // host:port of /metrics, /healthz, /snapshot
	BundleDir string
	History   time.Duration
	After     time.Duration
	MinGap    time.Duration
	// MaxBundles and MaxBytes bound the bundles in BundleDir (0: no bound).
	MaxBundles int
	MaxBytes   int64
	// RecorderBytes bounds the flight recorder's memory.
	RecorderBytes int64
	Redact        bool
	CommandLine   string
	Log           zerolog.Logger
	// Snapshot requests a bundle of the last History (SIGUSR1).
	Snapshot <-chan struct{}
	// SnapshotAPI lets POST /snapshot answer requests from any address
	// that reaches Listen; without it only loopback ones (the others get
	// 403). An endpoint that analyzes the whole history and writes to
	// disk is not for whoever reaches the node's address (Prometheus keeps
	// its TSDB snapshot off the same way, --web.enable-admin-api).
	SnapshotAPI bool
	// SnapshotGap is the least time between two POST /snapshot bundles of
	// one interface, whoever asks (429 with Retry-After sooner); SIGUSR1
	// is not limited. 0: no limit.
	SnapshotGap time.Duration
	// Ready is called once attached and listening, with the address.
	Ready func(addr string)
	// Upload, when set, uploads every bundle (and those BundleDir holds at
	// start); a bundle stays out of the budget's reach until uploaded.
	Upload *upload.Config
}

// FlowInterval is how often serve snapshots the flow tables: the per-flow
// throughput resolution of its bundles. A trace's 100 ms made the flow
// snapshots most of the recorder's memory and of a bundle's (many short
// flows, each snapshot kept for the whole history); window events still
// place a heavy flow to the fine window.
const FlowInterval = time.Second

// Agent is a running serve.
type Agent struct {
	cfg  Config
	m    *metrics.Metrics
	ring *flightrec.Ring
	log  zerolog.Logger

	mu       sync.Mutex
	meta     record.Meta
	attached bool
	trigger  flightrec.Trigger
	ifaces   map[string]*ifaceState
	written  int // bundles written (for tests and logs)
	// suppressed and dropped are what the metrics counted of the
	// trigger's Suppressed and the ring's Dropped.
	suppressed int
	dropped    uint64
	// originsDropped is what the metrics counted of origins.dropped.
	originsDropped uint64
	// owners resolves the owners of a bundle's flows from the origins
	// kept (nil when owners are not looked for).
	owners  *owner.Session
	origins *origins

	snapshots chan chan snapshotReply
	writeMu   sync.Mutex       // one bundle at a time
	uploader  *upload.Uploader // nil without --upload
	// snapshotAt is when POST /snapshot last wrote a bundle of each
	// interface (SnapshotGap); snapshotNames the base names of the
	// snapshot bundles this run wrote, which the bundle budget removes
	// before any incident's (flightrec.Prune).
	snapshotAt    map[string]int64
	snapshotNames map[string]bool
}

type snapshotReply struct {
	path string
	err  error
}

// ifaceState is what the metrics need to remember of one interface.
type ifaceState struct {
	hasCounters bool
	lastGood    *record.CounterSample // the last successful read
	lastReadNs  int64                 // AfterNs of the last successful read
	interval    time.Duration         // read interval in use
	guardSeen   int                   // the read guard's events already logged
	totals      [record.NumDirections]record.Totals
	loss        record.Loss
	peak        peakTracker
}

// Run serves until ctx ends, then detaches and writes the bundle of an
// incident still being recorded. An error before the programs were
// attached (a bad listen address, missing privileges) returns at once.
func Run(ctx context.Context, cfg Config) error {
	if err := os.MkdirAll(cfg.BundleDir, 0o750); err != nil {
		return fmt.Errorf("bundle directory %s: %w", cfg.BundleDir, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	a := &Agent{
		cfg: cfg,
		m:   metrics.New(cfg.Capture.Interfaces),
		// The ring holds an incident's history before its first jump and
		// its longest recording after it.
		ring:      flightrec.NewRing(cfg.History+maxSpan(cfg), cfg.RecorderBytes),
		log:       cfg.Log,
		trigger:   flightrec.Trigger{After: cfg.After, MinGap: cfg.MinGap, MaxSpan: maxSpan(cfg)},
		ifaces:    map[string]*ifaceState{},
		snapshots: make(chan chan snapshotReply),
		origins:   newOrigins(originBound(cfg.RecorderBytes)),
	}
	a.initSnapshots()
	for _, n := range cfg.Capture.Interfaces {
		a.ifaces[n] = &ifaceState{}
	}
	a.m.RecorderRingCapacity.Set(float64(cfg.RecorderBytes))
	a.m.RecorderHistory.Set(cfg.History.Seconds())
	a.m.CounterReadInterval.Set(cfg.Capture.SampleInterval.Seconds())

	srv := &http.Server{Handler: a.mux(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	ccfg := cfg.Capture
	ccfg.Duration = 0
	ccfg.FlowInterval = FlowInterval
	ccfg.Stream = &capture.Stream{
		Meta:             a.onMeta,
		Data:             a.onData,
		Sample:           a.onSample,
		Health:           a.onHealth,
		ForgetFlowsAfter: cfg.History + maxSpan(cfg),
		Owners:           a.onOwners,
	}
	attached := ccfg.Attached
	ccfg.Attached = func() {
		if attached != nil {
			attached()
		}
		a.log.Info().Strs("interfaces", cfg.Capture.Interfaces).Str("listen", ln.Addr().String()).
			Dur("history", cfg.History).Int64("recorder_bytes", cfg.RecorderBytes).
			Dur("read_interval", cfg.Capture.SampleInterval).Str("bundle_dir", cfg.BundleDir).
			Msg("attached; serving (SIGUSR1 or POST /snapshot writes a bundle)")
		if cfg.Ready != nil {
			cfg.Ready(ln.Addr().String())
		}
	}

	if cfg.Upload != nil {
		ucfg := *cfg.Upload
		ucfg.OnResult = func(r upload.Result) { a.m.BundleUploads.WithLabelValues(string(r)).Inc() }
		u, err := upload.New(ctx, ucfg)
		if err != nil {
			return err
		}
		a.uploader = u
		upCtx, stopUploads := context.WithCancel(context.Background())
		defer stopUploads()
		// Bundles a previous serve left (a restarted pod): the uploader
		// skips those the bucket holds already.
		if old, err := filepath.Glob(filepath.Join(cfg.BundleDir, flightrec.BundlePrefix+"*"+flightrec.BundleSuffix)); err == nil {
			for _, p := range old {
				u.Enqueue(p)
			}
		}
		go u.Run(upCtx, func(string) { _, _ = a.prune(false) })
	}

	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); a.loop(loopCtx) }()

	_, runErr := capture.Run(ctx, ccfg)
	stopLoop()
	<-loopDone
	a.mu.Lock()
	a.attached = false
	due := a.trigger.Due(0, true)
	a.mu.Unlock()
	// The incident being recorded when serve ends is written with what it
	// has: its evidence is the point of the recorder.
	var errs []error
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if a.metaKnown() {
		for _, in := range due {
			if _, err := a.writeIncident(in, monoclock.Now()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// maxSpan is how long an incident is recorded past its first jump at
// most: --history, or --after when longer.
func maxSpan(cfg Config) time.Duration { return max(cfg.History, cfg.After) }

func (a *Agent) metaKnown() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.meta.Start.MonoNs != 0
}

// loop writes the bundles of incidents whose recording ended, and those
// asked for, until ctx ends.
func (a *Agent) loop(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Snapshot:
			if p, err := a.writeSnapshot(); err != nil {
				a.log.Error().Err(err).Msg("snapshot on SIGUSR1")
			} else {
				a.log.Info().Str("bundle", p).Msg("snapshot written on SIGUSR1")
			}
		case reply := <-a.snapshots:
			p, err := a.writeSnapshot()
			reply <- snapshotReply{p, err}
		case <-tick.C:
			now := monoclock.Now()
			a.mu.Lock()
			due := a.trigger.Due(now, false)
			a.mu.Unlock()
			for _, in := range due {
				if _, err := a.writeIncident(in, now); err != nil {
					a.log.Error().Err(err).Str("interface", in.Interface).Msg("write incident bundle")
				}
			}
			a.m.RecorderRingBytes.Set(float64(a.ring.Bytes()))
			d := a.ring.Dropped()
			oldest := a.ring.OldestNs()
			a.mu.Lock()
			a.m.RecorderDropped.Add(float64(d - a.dropped))
			a.dropped = d
			a.origins.expire(oldest)
			a.m.OriginsDropped.Add(float64(a.origins.dropped - a.originsDropped))
			a.originsDropped = a.origins.dropped
			a.mu.Unlock()
		}
	}
}

func (a *Agent) mux() *http.ServeMux {
	mux := http.NewServeMux()
	metricsHandler := promhttp.HandlerFor(a.m.Registry, promhttp.HandlerOpts{Registry: a.m.Registry})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		a.publishPeaks()
		metricsHandler.ServeHTTP(w, r)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := a.healthy(monoclock.Now())
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
		if u := a.uploader; u != nil {
			// An unreachable bucket is not the probe failing: still 200.
			if at, err := u.LastError(); err != nil {
				fmt.Fprintf(w, "upload: last attempt failed at %s: %v\n", at.UTC().Format(time.RFC3339), err)
			}
		}
	})
	mux.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST writes a bundle of the last --history", http.StatusMethodNotAllowed)
			return
		}
		if !a.cfg.SnapshotAPI && !fromLoopback(r) {
			http.Error(w, "POST /snapshot answers only from loopback (curl -X POST http://127.0.0.1:PORT/snapshot on the node, or SIGUSR1); "+
				"serve --enable-snapshot-api answers it on --listen", http.StatusForbidden)
			return
		}
		if wait := a.claimSnapshot(a.cfg.Capture.Interfaces, monoclock.Now()); wait > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
			http.Error(w, fmt.Sprintf("a snapshot was written less than --snapshot-gap %v ago: retry in %v", a.cfg.SnapshotGap, wait.Round(time.Second)),
				http.StatusTooManyRequests)
			return
		}
		reply := make(chan snapshotReply, 1)
		select {
		case a.snapshots <- reply:
		case <-r.Context().Done():
			return
		}
		res := <-reply
		switch {
		case errors.Is(res.err, errBudgetFull):
			http.Error(w, res.err.Error(), http.StatusInsufficientStorage)
			return
		case res.err != nil:
			a.releaseSnapshot(a.cfg.Capture.Interfaces)
			http.Error(w, res.err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, res.path)
	})
	return mux
}

// healthy: attached, and every interface with counters read them within
// the last few intervals.
func (a *Agent) healthy(nowNs int64) (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.attached {
		return false, "not attached"
	}
	var stale []string
	for name, st := range a.ifaces {
		if !st.hasCounters {
			continue
		}
		limit := max(5*time.Second, 3*st.interval)
		if st.lastReadNs == 0 || time.Duration(nowNs-st.lastReadNs) > limit {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		return false, "counters not read lately on " + strings.Join(stale, ", ")
	}
	return true, ""
}

func (a *Agent) onMeta(m record.Meta) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.meta = m
	a.attached = true
	for _, info := range m.Interfaces {
		if st := a.ifaces[info.Name]; st != nil {
			st.hasCounters = info.ENA
			st.interval = a.cfg.Capture.SampleInterval
			a.m.Attached.WithLabelValues(info.Name).Set(1)
		}
	}
}

func (a *Agent) onOwners(s *owner.Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.owners = s
}

func (a *Agent) onData(iface string, r loader.Result) {
	now := monoclock.Now()
	loss := r.Loss
	a.ring.Add(now, flightrec.Chunk{Interface: iface, Series: r.Series, Sizes: r.Sizes, Flows: r.Flows,
		Windows: r.Windows, IMDS: r.IMDS, LinkLocalPayloads: r.LinkLocalPayloads, Totals: r.Totals, Loss: &loss})

	a.mu.Lock()
	defer a.mu.Unlock()
	a.origins.add(now, iface, r.Origins, r.Flows)
	st := a.ifaces[iface]
	if st == nil {
		return
	}
	for _, t := range r.Totals {
		prev := &st.totals[t.Direction]
		dir := t.Direction.String()
		a.m.Packets.WithLabelValues(iface, dir).Add(float64(t.SumPackets() - min(prev.SumPackets(), t.SumPackets())))
		a.m.Bytes.WithLabelValues(iface, dir).Add(float64(t.SumBytes() - min(prev.SumBytes(), t.SumBytes())))
		a.m.SYNs.WithLabelValues(iface, dir).Add(float64(t.SYNs - min(prev.SYNs, t.SYNs)))
		*prev = t
	}
	for _, s := range r.Series {
		var ll [record.NumServices]uint64
		for _, b := range s.Buckets {
			for i, n := range b.LinkLocal {
				ll[i] += n
			}
		}
		for i, n := range ll {
			if n > 0 {
				a.m.LinklocalPackets.WithLabelValues(iface, record.Services[i].String()).Add(float64(n))
			}
		}
		st.peak.add(s.Direction, s.Buckets)
	}
	addLoss := func(reason string, now, prev uint64) {
		if now > prev {
			a.m.Lost.WithLabelValues(iface, reason).Add(float64(now - prev))
		}
	}
	p := st.loss
	addLoss(metrics.LossFlowMapFull, loss.FlowMapFull, p.FlowMapFull)
	addLoss(metrics.LossRingbufFull, loss.RingbufFull, p.RingbufFull)
	addLoss(metrics.LossBucketOverwritten, loss.BucketOverwritten, p.BucketOverwritten)
	addLoss(metrics.LossSliceOverwritten, loss.SliceOverwritten, p.SliceOverwritten)
	addLoss(metrics.LossFlowsEvicted, loss.FlowsEvicted, p.FlowsEvicted)
	addLoss(metrics.LossIMDSEvents, loss.IMDSEvents, p.IMDSEvents)
	addLoss(metrics.LossLinkLocalPayloads, loss.LinkLocalPayloads, p.LinkLocalPayloads)
	st.loss = loss
}

// allowanceLabel maps the ENA counter names to the allowance label.
var allowanceLabel = map[string]string{
	counters.BwInAllowanceExceeded:      metrics.AllowanceBwIn,
	counters.BwOutAllowanceExceeded:     metrics.AllowanceBwOut,
	counters.PPSAllowanceExceeded:       metrics.AllowancePPS,
	counters.ConntrackAllowanceExceeded: metrics.AllowanceConntrack,
	counters.LinklocalAllowanceExceeded: metrics.AllowanceLinklocal,
}

func (a *Agent) onSample(s record.CounterSample) {
	a.ring.Add(s.AfterNs, flightrec.Chunk{Interface: s.Interface, Counters: []record.CounterSample{s}})
	a.m.CounterReadSeconds.WithLabelValues(s.Interface).Observe(time.Duration(s.AfterNs - s.BeforeNs).Seconds())

	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.ifaces[s.Interface]
	if st == nil {
		return
	}
	// Diff over the last good read and this one: resets are never
	// negative increases, an all-zero read after nonzero values is a
	// failed admin command.
	pair := []record.CounterSample{s}
	if st.lastGood != nil {
		pair = []record.CounterSample{*st.lastGood, s}
	}
	ch := counters.Diff(pair)
	for _, f := range ch.Failed {
		if f.BeforeNs == s.BeforeNs {
			a.m.CounterReadErrors.WithLabelValues(s.Interface).Inc()
			return
		}
	}
	st.lastGood = &s
	st.lastReadNs = s.AfterNs
	for _, g := range ch.Gauges {
		if g.Name == counters.ConntrackAllowanceAvailable && g.BeforeNs == s.BeforeNs {
			a.m.ConntrackAllowanceAvailable.WithLabelValues(s.Interface).Set(float64(g.Value))
		}
	}
	for _, j := range ch.Jumps {
		label, ok := allowanceLabel[j.Name]
		if !ok {
			continue
		}
		a.m.AllowanceExceeded.WithLabelValues(s.Interface, label).Add(float64(j.Delta))
		if a.trigger.Jump(s.Interface, j.Name, s.BeforeNs) {
			a.log.Info().Str("interface", s.Interface).Str("counter", j.Name).Uint64("delta", j.Delta).
				Dur("after", a.cfg.After).Msg("allowance counter jumped: recording the incident")
		}
	}
	if n := a.trigger.Suppressed - a.suppressed; n > 0 {
		a.m.BundlesSkipped.WithLabelValues(metrics.SkippedMinGap).Add(float64(n))
		a.suppressed = a.trigger.Suppressed
	}
}

func (a *Agent) onHealth(iface string, h capture.Health) {
	a.m.FlowTableFill.WithLabelValues(iface).Set(h.FlowTableFill)
	a.m.RingUse.WithLabelValues(iface).Set(h.RingUse)
	a.m.RecorderRingBytes.Set(float64(a.ring.Bytes()))
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.ifaces[iface]; st != nil && h.SampleInterval > 0 {
		if h.SampleInterval != st.interval {
			a.log.Info().Str("interface", iface).Dur("read_interval", h.SampleInterval).Msg("ENA counter read interval changed (reads slow: backing off)")
		}
		st.interval = h.SampleInterval
		a.m.CounterReadInterval.Set(h.SampleInterval.Seconds())
	}
	if st := a.ifaces[iface]; st != nil {
		a.noteReadGuard(iface, st, h.Guarded)
	}
}

// noteReadGuard logs and exports what the counter reads' guard did since
// the last health report, and keeps it for the bundles. Called with a.mu
// held.
func (a *Agent) noteReadGuard(iface string, st *ifaceState, g ena.GuardStatus) {
	for _, ev := range g.Events[min(st.guardSeen, len(g.Events)):] {
		a.log.Warn().Str("interface", iface).Str("reason", ev.Reason).Str("action", ev.Action).
			Dur("read_interval", time.Duration(ev.IntervalNs)).Msg("ENA device shows trouble: counter reads " + ev.Action)
		a.m.CounterReadSigns.WithLabelValues(iface).Inc()
		a.meta.CounterGuard = append(a.meta.CounterGuard, ev) // the bundles' reports say it too
	}
	st.guardSeen = len(g.Events)
	state := metrics.ReadGuardReading
	switch g.State {
	case record.CounterGuardBackedOff:
		state = metrics.ReadGuardBackedOff
	case record.CounterGuardStopped:
		state = metrics.ReadGuardStopped
	}
	a.m.CounterReadGuard.WithLabelValues(iface).Set(float64(state))
}

// publishPeaks sets the peak gauges to the highest 1 ms rate since the
// last scrape, and starts the next interval.
func (a *Agent) publishPeaks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, st := range a.ifaces {
		for d := range record.NumDirections {
			bps := st.peak.take(record.Direction(d))
			a.m.PeakBitsPerSecond.WithLabelValues(name, record.Direction(d).String(), metrics.PeakWindow).Set(bps)
		}
	}
}

// bundleName names a bundle with its UTC time and what it holds. An
// incident's: its interface, then the finding kinds, else the counters that
// jumped. A snapshot's: "snapshot" and every interface ('+' between them),
// never kinds, so a bundle asked for is never taken for an incident.
func bundleName(t time.Time, ifaces []string, trigger string, kinds []string) string {
	name := flightrec.BundlePrefix + t.UTC().Format("20060102T150405.000Z")
	if trigger == record.TriggerSnapshot {
		name += "-" + record.TriggerSnapshot
		if len(ifaces) > 0 {
			name += "-" + strings.Join(ifaces, "+")
		}
		return name + flightrec.BundleSuffix
	}
	if len(ifaces) == 1 {
		name += "-" + ifaces[0]
	}
	if len(kinds) > 0 {
		name += "-" + strings.Join(kinds, "+")
	}
	return name + flightrec.BundleSuffix
}

func (a *Agent) writeSnapshot() (string, error) {
	a.mu.Lock()
	known := a.meta.Start.MonoNs != 0
	a.mu.Unlock()
	if !known {
		return "", errors.New("not attached yet")
	}
	now := monoclock.Now()
	return a.write(nil, now-int64(a.cfg.History), now, now, record.TriggerSnapshot, nil)
}

func (a *Agent) writeIncident(in flightrec.Incident, nowNs int64) (string, error) {
	from := in.FirstNs - int64(a.cfg.History)
	to := max(in.UntilNs, nowNs)
	return a.write([]string{in.Interface}, from, to, in.FirstNs, record.TriggerIncident, in.Counters)
}

// write analyzes the span of the recorder and writes its bundle, named
// with the time of atNs (the first jump, or the request) and what it holds
// (bundleName), then keeps the bundle directory within budget. trigger
// goes into the recording's metadata.
func (a *Agent) write(ifaces []string, fromNs, toNs, atNs int64, trigger string, jumped []string) (string, error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	meta := a.meta
	meta.CounterGuard = slices.Clone(meta.CounterGuard)
	a.mu.Unlock()
	fromNs = max(fromNs, meta.Start.MonoNs)
	end := record.ClockPair{MonoNs: monoclock.Now(), Wall: time.Now()}
	rec := a.ring.Recording(meta, ifaces, fromNs, toNs, end)
	rec.Meta.Trigger = trigger
	a.resolveOwners(rec)
	res := analyzer.Analyze(rec, a.cfg.Analysis)
	rec.Meta.Analysis = analyzer.Inputs(res, a.cfg.Analysis)

	var kinds []string
	for _, f := range res.Findings {
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	if len(kinds) == 0 {
		kinds = jumped
	}
	if ifaces == nil {
		for _, i := range rec.Meta.Interfaces {
			ifaces = append(ifaces, i.Name)
		}
	}
	env := record.EnvironmentOf(rec)
	env.CommandLine = a.cfg.CommandLine
	in := report.Input{Result: res, Recording: rec, Env: env}
	if a.cfg.Redact {
		in = report.Redact(in)
	}
	at := end.Wall.Add(-time.Duration(end.MonoNs - atNs))
	name := bundleName(at, ifaces, trigger, kinds)
	path := filepath.Join(a.cfg.BundleDir, name)
	for n := 2; fileExists(path); n++ { // two in one millisecond
		path = filepath.Join(a.cfg.BundleDir, strings.TrimSuffix(name, flightrec.BundleSuffix)+fmt.Sprintf("-%d", n)+flightrec.BundleSuffix)
	}
	if err := report.WriteBundle(path, in); err != nil {
		a.m.BundleErrors.Inc()
		return "", err
	}
	a.m.BundlesWritten.Inc()
	for _, f := range res.Findings {
		a.m.Findings.WithLabelValues(f.Interface, f.Kind).Inc()
	}
	snapshot := trigger == record.TriggerSnapshot
	a.mu.Lock()
	a.written++
	if snapshot {
		a.snapshotNames[filepath.Base(path)] = true
	}
	a.mu.Unlock()
	a.log.Info().Str("bundle", path).Strs("findings", kinds).Dur("span", time.Duration(toNs-fromNs)).Msg("bundle written")
	// Analyzing and rendering a bundle takes tens of MiB for a moment;
	// hand them back, so an agent's RSS stays what its ring needs.
	debug.FreeOSMemory()
	removed, err := a.prune(snapshot)
	if slices.Contains(removed, path) {
		return "", errBudgetFull
	}
	// Queued once it stays: from now on the budget keeps it until it is in
	// the bucket.
	if u := a.uploader; u != nil {
		u.Enqueue(path)
	}
	return path, err
}

// prune keeps the bundle directory within budget: snapshots go first,
// and after a snapshot only snapshots (flightrec.Prune); a bundle that
// waits for its upload never goes.
func (a *Agent) prune(forSnapshot bool) ([]string, error) {
	b := flightrec.Budget{MaxBundles: a.cfg.MaxBundles, MaxBytes: a.cfg.MaxBytes}
	if u := a.uploader; u != nil {
		b.Pending = u.Pending
	}
	removed, _, err := flightrec.Prune(a.cfg.BundleDir, b, a.isSnapshot, forSnapshot)
	for _, p := range removed {
		a.log.Info().Str("bundle", p).Msg("removed the oldest bundle: over --max-bundles or --max-bytes")
	}
	a.m.BundlesRemoved.Add(float64(len(removed)))
	a.mu.Lock()
	for _, p := range removed {
		delete(a.snapshotNames, filepath.Base(p))
	}
	a.mu.Unlock()
	if err != nil {
		return removed, fmt.Errorf("keep %s within budget: %w", a.cfg.BundleDir, err)
	}
	return removed, nil
}

// errBudgetFull is a snapshot that did not stay: incident bundles alone
// fill --max-bundles or --max-bytes, and snapshots never remove them.
var errBudgetFull = errors.New("snapshot not kept: incident bundles fill --max-bundles or --max-bytes, and a snapshot never removes one")

func (a *Agent) initSnapshots() {
	a.snapshotAt = map[string]int64{}
	a.snapshotNames = map[string]bool{}
}

// isSnapshot says whether a bundle of the directory is a snapshot: one this
// run wrote as such, or one an earlier run named as a snapshot
// (enaprobe-<time>-snapshot-<iface>.tar.gz, or enaprobe-<time>-snapshot.tar.gz
// when it found nothing). Any other is taken for an incident's, and kept.
func (a *Agent) isSnapshot(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rest := strings.TrimPrefix(name, flightrec.BundlePrefix)
	return a.snapshotNames[name] || strings.Contains(rest, "-snapshot-") || strings.HasSuffix(rest, "-snapshot"+flightrec.BundleSuffix)
}

// claimSnapshot takes the interfaces' turn for a POST /snapshot bundle, or
// says how long until they have one (SnapshotGap).
func (a *Agent) claimSnapshot(ifaces []string, nowNs int64) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(ifaces) == 0 {
		ifaces = []string{""}
	}
	var wait time.Duration
	for _, i := range ifaces {
		if at, ok := a.snapshotAt[i]; ok && a.cfg.SnapshotGap > 0 {
			wait = max(wait, time.Duration(at+int64(a.cfg.SnapshotGap)-nowNs))
		}
	}
	if wait > 0 {
		return wait
	}
	for _, i := range ifaces {
		a.snapshotAt[i] = nowNs
	}
	return 0
}

// releaseSnapshot gives back a turn whose bundle was not written.
func (a *Agent) releaseSnapshot(ifaces []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, i := range append(ifaces, "") {
		delete(a.snapshotAt, i)
	}
}

// fromLoopback: the request came from a loopback address (127.0.0.0/8,
// ::1). The kernel drops packets from outside that claim such a source
// (martians), so only a process of the host itself sends one.
func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// resolveOwners names the owners of rec's flows, only those, as a trace
// names its flows' at its end: the expensive part of owner attribution
// runs when a bundle is written, not as the flows come.
func (a *Agent) resolveOwners(rec *record.Recording) {
	if a.cfg.Capture.NoOwners {
		rec.Meta.OwnerNotes = []string{capture.NoOwnersNote}
		return
	}
	a.mu.Lock()
	s, origins, dropped := a.owners, a.origins.of(rec), a.origins.dropped
	a.mu.Unlock()
	if s == nil {
		return // not attached
	}
	owners, notes, err := s.Resolve(origins, false)
	if err != nil {
		a.log.Warn().Err(err).Msg("owners of the bundle's flows")
	}
	if dropped > 0 {
		notes = append(notes, fmt.Sprintf("owners: %d flows' origins were not kept (the flight recorder keeps at most %d, one per flow snapshot it can hold): their flows have no owner (raise --recorder-bytes)", dropped, a.origins.max))
	}
	rec.Owners, rec.Meta.OwnerNotes = owners, notes
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
