package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
	"github.com/enaprobe/enaprobe/loader"
)

type traceFlags struct {
	duration       time.Duration
	interfaces     []string
	capture        captureFlags
	countersFiles  []string
	countersReplay []string
	noIMDS         bool
	heavyShare     float64
	flowEntries    uint32
	llPayloadRate  uint32
	noOwners       bool
	ownerSockets   uint32
	logLevel       string
	debug          bool
	verifierLog    string
	cpuProfile     string
	analysis       analysisFlags
	out            outputFlags
}

func newTraceCommand() *cobra.Command {
	f := &traceFlags{}
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Trace interfaces and report which bursts, flows and services hit which allowance",
		Long: `trace attaches the eBPF datapath to tc ingress and egress of each interface,
samples its ENA allowance counters, and at the end (the duration, or Ctrl-C)
prints a report: findings ranked by severity, then the traffic profile.

It needs root (or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON). Nothing is ever
dropped or changed: the programs only count.`,
		Example: `  # 30 s on the default-route interface, text report on stdout
  sudo enaprobe trace

  # two interfaces for 2 minutes, JSON on stdout and a bundle for a ticket
  sudo enaprobe trace -i ens5 -i ens6 --duration 2m --format json -o /tmp/ena.tar.gz --redact

  # off EC2, with counters written by an emulator in ethtool -S format
  sudo enaprobe trace -i veth0 --counters-file veth0=/run/lab/counters.txt --instance-type c6i.large`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTrace(cmd.Context(), cmd, f) },
	}
	fs := cmd.Flags()
	fs.DurationVarP(&f.duration, "duration", "d", 30*time.Second, "how long to trace, a duration, e.g. 30s or 2m (0: until Ctrl-C); Ctrl-C ends early and still writes the report")
	f.registerCapture(fs, ena.DefaultInterval, "each read is a device command")
	f.out.register(fs)
	return cmd
}

// registerCapture registers the flags trace and serve share: interfaces,
// datapath, counters, analysis, logs.
func (f *traceFlags) registerCapture(fs *pflag.FlagSet, sampleInterval time.Duration, sampleNote string) {
	fs.StringSliceVarP(&f.interfaces, "interface", "i", nil, "interface to trace, repeatable (default: the interface of the default route)")
	f.capture.register(fs, sampleInterval, sampleNote)
	fs.StringArrayVar(&f.countersFiles, "counters-file", nil, "[IFACE=]PATH: read IFACE's counters from a file in ethtool -S format at every sample (labs, emulators, replays)")
	fs.StringArrayVar(&f.countersReplay, "counters-replay", nil, "[IFACE=]BUNDLE: replay the counters a saved bundle or recording holds for IFACE (or for its only interface), on their recorded timeline")
	fs.BoolVar(&f.noIMDS, "no-imds", false, "never ask the instance metadata service (instance type, placement group, VPC CIDR)")
	fs.Float64Var(&f.heavyShare, "heavy-share", 0.1, "a flow moving this share of the per-flow cap within one fine window is recorded as a heavy window, above 0 and at most 1, e.g. 0.1")
	fs.Uint32Var(&f.flowEntries, "flow-entries", loader.DefaultOptions().FlowEntries, "flow table capacity per interface, in flows, e.g. 65536 (kernel memory: about 150 bytes a flow)")
	fs.Uint32Var(&f.llPayloadRate, "linklocal-payload-rate", loader.DefaultOptions().LinkLocalPayloadRate, "link-local packets (DNS, IMDS requests, NTP) per second per interface whose first payload bytes are recorded for the link-local detail, e.g. 4096; those over it are counted as loss; 0 records none")
	fs.BoolVar(&f.noOwners, "no-owners", false, "do not look for the process, container or pod behind each flow (no cgroup programs are attached)")
	fs.Uint32Var(&f.ownerSockets, "owner-sockets", loader.DefaultSockets, "sockets whose owner is remembered at once, e.g. 16384 (kernel memory: about 100 bytes each; read every second, the least recently used evicted, and counted)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&f.debug, "debug", false, "debug logs, and the verifier's whole log on stderr if the kernel rejects the programs")
	fs.StringVar(&f.verifierLog, "verifier-log", "", "if the kernel rejects the programs, write the verifier's whole log to this file (e.g. /tmp/verifier.log)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the trace to this file (to measure enaprobe's own overhead)")
	_ = fs.MarkHidden("cpuprofile")
	f.analysis.register(fs)
}

func runTrace(ctx context.Context, cmd *cobra.Command, f *traceFlags) error {
	if err := f.out.validate(); err != nil {
		return err
	}
	cfg, aopts, log, err := prepareCapture(ctx, cmd, f, func() error { return checkBundlePath(f.out.output) })
	if err != nil {
		return err
	}
	cfg.Duration = f.duration
	ifaces := cfg.Interfaces
	status := newStatusLine(cmd.ErrOrStderr(), log, f.duration)
	cfg.Progress = status.update
	cfg.Notice = func(msg string) { log.Warn().Msg(msg) }
	cfg.Attached = func() {
		log.Info().Strs("interfaces", ifaces).Dur("duration", f.duration).Msg("attached; tracing (Ctrl-C ends early)")
		f.capture.ready(strconv.Itoa(os.Getpid()), log)
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rec, err := capture.Run(ctx, cfg)
	status.done()
	if rec == nil {
		return setUpError(cmd, f, err)
	}
	if err != nil {
		log.Error().Err(err).Msg("the trace failed after it ran: reporting what was counted")
	}
	warnLoss(rec, log)
	return errors.Join(err, writeReports(cmd.OutOrStdout(), rec, aopts, f.out, environment(rec, strings.Join(os.Args, " ")), log))
}

// setUpError gives an error of loading or attaching its exit code: a
// rejected program or a missing permission is a missing privilege or kernel
// feature.
func setUpError(cmd *cobra.Command, f *traceFlags, err error) error {
	var vr *loader.VerifierRejection
	if errors.As(err, &vr) {
		return privilegeError{verifierLog(cmd.ErrOrStderr(), err, vr, f)}
	}
	if errors.Is(err, os.ErrPermission) {
		return privilegeError{err}
	}
	return err
}

// prepareCapture checks the flags trace and serve share and builds the
// capture's configuration and the analysis options from them; checkOutput
// checks where the results go, before anything is loaded.
func prepareCapture(ctx context.Context, cmd *cobra.Command, f *traceFlags, checkOutput func() error) (capture.Config, analyzer.Options, zerolog.Logger, error) {
	var (
		cfg   capture.Config
		aopts analyzer.Options
		log   zerolog.Logger
	)
	fail := func(err error) (capture.Config, analyzer.Options, zerolog.Logger, error) { return cfg, aopts, log, err }
	mode, err := f.capture.check()
	if err != nil {
		return fail(err)
	}
	if f.duration < 0 {
		return fail(usagef("--duration %v: must not be negative", f.duration))
	}
	if !(f.heavyShare > 0 && f.heavyShare <= 1) {
		return fail(usagef("--heavy-share %v: want a share above 0 and at most 1, e.g. 0.1", f.heavyShare))
	}
	if f.flowEntries == 0 {
		return fail(usagef("--flow-entries 0: want a flow table capacity, e.g. %d", loader.DefaultOptions().FlowEntries))
	}
	if f.ownerSockets == 0 {
		return fail(usagef("--owner-sockets 0: want a capacity, e.g. %d (or --no-owners)", loader.DefaultSockets))
	}
	if err := checkLogLevel(f.logLevel); err != nil {
		return fail(err)
	}
	log = newLogger(cmd.ErrOrStderr(), f.logLevel, f.debug)
	if f.analysis.window, err = f.capture.fineWindow(f.analysis.window, log); err != nil {
		return fail(err)
	}
	aopts, err = f.analysis.options()
	if err != nil {
		return fail(err)
	}

	ifaces := dedupe(f.interfaces)
	if len(ifaces) == 0 {
		name, err := capture.DefaultRouteInterface()
		if err != nil {
			return fail(usagef("no --interface given and %v", err))
		}
		ifaces = []string{name}
	}
	if err := interfacesExist(ifaces); err != nil {
		return fail(err)
	}
	sources, err := counterFiles(f.countersFiles, ifaces)
	if err != nil {
		return fail(err)
	}
	if err := counterReplays(sources, f.countersReplay, ifaces); err != nil {
		return fail(err)
	}
	// Every capability the load and attach need, before anything is loaded:
	// the verifier's message for a missing one misleads.
	if err := capture.CheckCapabilities(); err != nil {
		return fail(err)
	}
	if err := checkOutput(); err != nil {
		return fail(err)
	}

	cfg = capture.DefaultConfig()
	cfg.Interfaces = ifaces
	cfg.Duration = f.duration
	cfg.Attach = mode
	cfg.SampleInterval = f.capture.sampleInterval
	cfg.CounterRefresh = aopts.CounterRefresh
	cfg.CounterSources = sources
	cfg.Datapath.Bucket = f.capture.bucket
	cfg.Datapath.Window = f.analysis.window
	cfg.Datapath.FlowEntries = f.flowEntries
	cfg.Datapath.LinkLocalPayloadRate = f.llPayloadRate
	cfg.NoOwners = f.noOwners
	cfg.OwnerSockets = f.ownerSockets
	cfg.Meta.Version = version

	// What the instance is: flags first, IMDS on EC2 (once, cached).
	host := discoverHost(ctx, f, ifaces, log)
	inst := host.Instance
	cfg.Meta.InstanceType = cmp.Or(f.analysis.instanceType, inst.InstanceType)
	if it := cfg.Meta.InstanceType; it != "" && f.analysis.baseline == 0 {
		if _, ok := limits.Lookup(it); !ok {
			log.Warn().Str("instance_type", it).Strs("did_you_mean", limits.Nearest(it)).Msg("not in the table: give --baseline and --burst for allowance findings")
		}
	}
	switch {
	case f.analysis.instanceType != "":
		aopts.Sources.InstanceType = "options"
	case inst.InstanceType != "":
		aopts.Sources.InstanceType = "IMDS"
		aopts.InstanceType = inst.InstanceType
	}
	flowCap := host.FlowCap
	cfg.Meta.FlowLimitBps = flowCap.Bps
	aopts.FlowLimitBps = flowCap.Bps
	aopts.Sources.FlowLimit = flowCap.Source
	log.Debug().Str("reason", flowCap.Reason).Float64("flow_limit_bps", flowCap.Bps).Msg("per-flow cap")
	cfg.Datapath.VPCResolver = host.VPCResolver
	cfg.Datapath.HeavyBytes = capture.HeavyWindowBytes(flowCap.Bps, f.heavyShare, f.analysis.window)
	for _, name := range ifaces {
		if down, err := interfaceDown(name); err == nil && down {
			log.Warn().Str("interface", name).Msg("the interface is down: it carries no traffic until it comes up")
		}
	}

	return cfg, aopts, log, nil
}

// checkLogLevel refuses a level zerolog does not know.
func checkLogLevel(level string) error {
	switch level {
	case "debug", "info", "warn", "error":
		return nil
	}
	return usagef("--log-level %q: want debug, info, warn or error", level)
}

// dedupe drops repeated names, keeping the first of each: "-i lo -i lo" is
// one interface traced once.
func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// interfacesExist refuses an interface name this host does not have.
func interfacesExist(names []string) error {
	for _, n := range names {
		if _, err := net.InterfaceByName(n); err != nil {
			return usagef("--interface %s: no such interface here (ip link lists them)", n)
		}
	}
	return nil
}

// interfaceDown tells whether an interface is administratively down.
func interfaceDown(name string) (bool, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return false, err
	}
	return ifc.Flags&net.FlagUp == 0, nil
}

// verifierLog hands the log of a rejected program where the flags say:
// whole on stderr with --debug, to the file of --verifier-log; the error
// stays one line and says where the log is, or how to get it.
func verifierLog(stderr io.Writer, err error, vr *loader.VerifierRejection, f *traceFlags) error {
	text := strings.Join(vr.Log, "\n") + "\n"
	if f.debug {
		fmt.Fprintf(stderr, "verifier log of %s:\n%s", vr.Program, text)
	}
	if f.verifierLog != "" {
		if werr := os.WriteFile(f.verifierLog, []byte(text), 0o644); werr != nil {
			return fmt.Errorf("%w; writing its log to %s failed: %v", err, f.verifierLog, werr)
		}
		return fmt.Errorf("%w; the log is in %s", err, f.verifierLog)
	}
	if f.debug {
		return fmt.Errorf("%w; the log is above", err)
	}
	return fmt.Errorf("%w; --verifier-log FILE saves the log", err)
}

// perInterface splits the value of a repeatable [IFACE=]VALUE flag: without
// IFACE it is for the only traced interface.
func perInterface(flag, what, v string, ifaces []string) (iface, value string, err error) {
	if iface, value, ok := strings.Cut(v, "="); ok {
		return iface, value, nil
	}
	if len(ifaces) != 1 {
		return "", "", usagef("--%s %s: name the interface (IFACE=%s) when tracing several", flag, v, what)
	}
	return ifaces[0], v, nil
}

// counterFiles parses --counters-file [IFACE=]PATH values.
func counterFiles(vals, ifaces []string) (map[string]ena.Source, error) {
	out := map[string]ena.Source{}
	for _, v := range vals {
		iface, path, err := perInterface("counters-file", "PATH", v, ifaces)
		if err != nil {
			return nil, err
		}
		if err := checkCountersFile(path); err != nil {
			return nil, usagef("--counters-file %s: %v", v, err)
		}
		out[iface] = ena.NewFileSource(path)
	}
	return out, nil
}

// checkCountersFile refuses a file that is not ethtool -S output, at once,
// instead of one failed read per sample.
func checkCountersFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return counters.CheckEthtoolS(io.LimitReader(f, 1<<20))
}

// counterReplays adds --counters-replay [IFACE=]BUNDLE sources.
func counterReplays(sources map[string]ena.Source, vals, ifaces []string) error {
	for _, v := range vals {
		iface, path, err := perInterface("counters-replay", "BUNDLE", v, ifaces)
		if err != nil {
			return err
		}
		rec, _, err := record.ReadBundle(path)
		if err != nil {
			return usagef("--counters-replay %s: %v", v, err)
		}
		recorded := ena.RecordedInterfaces(rec)
		from := iface
		if !slices.Contains(recorded, iface) {
			if len(recorded) != 1 {
				return usagef("--counters-replay %s: the recording has counters of %v, not of %s", v, recorded, iface)
			}
			from = recorded[0]
		}
		src, err := ena.NewReplaySource(rec, from, nil)
		if err != nil {
			return usagef("--counters-replay %s: %v", v, err)
		}
		sources[iface] = src
	}
	return nil
}

// discoverHost learns what the instance is (limits.Discover) and logs it.
func discoverHost(ctx context.Context, f *traceFlags, ifaces []string, log zerolog.Logger) limits.Discovery {
	d := limits.Discover(ctx, limits.Host{Interfaces: ifaces, ENA: ena.ExpressMode, NoIMDS: f.noIMDS, FlowLimitOverride: f.analysis.flowLimit})
	switch {
	case !d.AskedIMDS:
		log.Debug().Msg("no ENA interface traced or --no-imds: not asking IMDS")
	case d.IMDSErr != nil:
		log.Warn().Err(d.IMDSErr).Msg("instance metadata unavailable; pass --instance-type for allowance findings")
	default:
		inst := d.Instance
		log.Info().Str("instance_type", inst.InstanceType).Str("placement_group", inst.PlacementGroup).Int("imds_requests", inst.Requests).Msg("instance discovered")
	}
	return d
}

func warnLoss(rec *record.Recording, log zerolog.Logger) {
	for _, l := range rec.Loss {
		if l.FlowMapFull+l.RingbufFull+l.BucketOverwritten+l.SliceOverwritten+l.IMDSEvents+l.LinkLocalPayloads > 0 {
			log.Warn().Str("interface", l.Interface).Uint64("flow_map_full", l.FlowMapFull).
				Uint64("ringbuf_full", l.RingbufFull).Uint64("bucket_overwritten", l.BucketOverwritten).
				Uint64("slice_overwritten", l.SliceOverwritten).Uint64("imds_events", l.IMDSEvents).
				Uint64("linklocal_payloads", l.LinkLocalPayloads).Msg("the trace lost data; see the loss section")
		}
	}
}

func newLogger(w io.Writer, level string, debug bool) zerolog.Logger {
	return newLoggerFor(w, isTerminal(w), level, debug)
}

// logFormat is how every log line writes time: durations as strings with
// their unit ("30s", "225.227ms"; zerolog's default is a bare number of
// milliseconds), timestamps to the millisecond (its default RFC 3339 drops
// them, so a terminal showed ".000" on every line).
var logFormat = sync.OnceFunc(func() {
	zerolog.DurationFieldFormat = zerolog.DurationFormatString
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
})

func newLoggerFor(w io.Writer, tty bool, level string, debug bool) zerolog.Logger {
	logFormat()
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	if debug {
		lvl = zerolog.DebugLevel
	}
	out := w
	if tty {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// statusLine shows progress on a terminal, and logs it now and then
// otherwise.
type statusLine struct {
	w        io.Writer
	duration time.Duration // 0: until Ctrl-C
	tty      bool
	log      zerolog.Logger
	lastLog  time.Time
	shown    bool
}

func newStatusLine(w io.Writer, log zerolog.Logger, duration time.Duration) *statusLine {
	return &statusLine{w: w, tty: isTerminal(w), log: log, duration: duration}
}

func (s *statusLine) update(p capture.Progress) {
	left := "until Ctrl-C"
	if s.duration > 0 {
		left = p.Remaining.Round(time.Second).String() + " left"
	}
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K%s  %s  %d packets  %s  %d counter jumps", p.Elapsed.Round(time.Second), left,
			p.Packets, units.BitRate(float64(p.Bytes)*8/max(p.Elapsed.Seconds(), 1e-3)), p.CounterJumps)
		s.shown = true
		return
	}
	if time.Since(s.lastLog) >= 5*time.Second {
		s.lastLog = time.Now()
		s.log.Info().Dur("elapsed", p.Elapsed).Uint64("packets", p.Packets).Uint64("bytes", p.Bytes).Int("counter_jumps", p.CounterJumps).Msg("tracing")
	}
}

func (s *statusLine) done() {
	if s.tty && s.shown {
		fmt.Fprint(s.w, "\r\033[K")
	}
}
