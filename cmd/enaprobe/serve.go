package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/serve/agent"
	"github.com/enaprobe/enaprobe/internal/upload"
)

// serveReadInterval is serve's default ENA counter read interval: see the
// docs/serve.md ("ENA counter reads") for the measurement behind it.
const serveReadInterval = time.Second

// serveBackoff is how serve lengthens its read interval while reads are
// slow: 3 reads in a row that take more than 1% of the interval double it,
// up to 30 s; 10 fast reads in a row halve it back.
var serveBackoff = ena.Backoff{Max: 30 * time.Second, Share: 0.01, Slow: 3, Recover: 10, Guard: ena.DefaultGuard}

type serveFlags struct {
	traceFlags
	listen        string
	bundleDir     string
	history       time.Duration
	after         time.Duration
	minGap        time.Duration
	snapshotAPI   bool
	snapshotGap   time.Duration
	maxBundles    int
	maxBytes      int64
	recorderBytes int64
	redact        bool
	upload        string
	uploadOpts    uploadFlags
}

func newServeCommand() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run as an agent: a flight recorder of the last minute, Prometheus metrics, a bundle per incident",
		Long: `serve attaches the same datapath as trace and runs until SIGINT or SIGTERM. It
keeps the last --history of buckets, flows and counter reads in bounded memory.
When an allowance counter jumps it records --after more (a jump meanwhile
extends it), then writes a bundle (as trace -o writes) to --bundle-dir covering
--history before the first jump to the end, named with the time and the kinds
found; at most one per --min-gap per interface, the oldest removed beyond
--max-bundles or --max-bytes (snapshots first: a snapshot never removes an
incident's bundle). SIGUSR1 or POST /snapshot writes one of the last --history
at once; POST /snapshot answers only from loopback unless --enable-snapshot-api,
at most once per --snapshot-gap. /metrics serves Prometheus metrics and
/healthz answers 200 while the probe is attached and the counters are read, on
--listen only.

It needs root (or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON).`,
		Example: `  sudo enaprobe serve -i ens5 --bundle-dir /var/lib/enaprobe

  # metrics on every address of the host, a bundle at most every 10 minutes
  sudo enaprobe serve -i ens5 --bundle-dir /var/lib/enaprobe --listen :9464 --min-gap 10m

  # a bundle now
  sudo kill -USR1 $(pidof enaprobe); curl -X POST http://127.0.0.1:9464/snapshot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), cmd, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9464", "address of /metrics, /healthz and POST /snapshot, host:port (e.g. :9464 for every address)")
	fs.StringVar(&f.bundleDir, "bundle-dir", "", "directory the bundles go to, created if needed (required), e.g. /var/lib/enaprobe")
	fs.DurationVar(&f.history, "history", time.Minute, "how much the flight recorder keeps, and a bundle holds before the first jump, a duration from 1s to 10m, e.g. 60s")
	fs.DurationVar(&f.after, "after", 10*time.Second, "how long to keep recording after the last jump before writing the bundle, a duration from 0 to 5m, e.g. 10s")
	fs.DurationVar(&f.minGap, "min-gap", 5*time.Minute, "at most one incident bundle per interface within this long, a duration, e.g. 5m (0: no limit)")
	fs.BoolVar(&f.snapshotAPI, "enable-snapshot-api", false, "answer POST /snapshot from any address that reaches --listen (without it: from loopback only; SIGUSR1 always)")
	fs.DurationVar(&f.snapshotGap, "snapshot-gap", time.Minute, "at most one POST /snapshot bundle per interface within this long, whoever asks (429 sooner), a duration, e.g. 1m (0: no limit)")
	fs.IntVar(&f.maxBundles, "max-bundles", 20, "keep at most this many bundles in --bundle-dir, the oldest removed first (0: no limit)")
	fs.Int64Var(&f.maxBytes, "max-bytes", 500<<20, "keep the bundles in --bundle-dir within this many bytes, the oldest removed first (0: no limit)")
	fs.Int64Var(&f.recorderBytes, "recorder-bytes", 64<<20, fmt.Sprintf("memory bound of the flight recorder in bytes, from 1 MiB to %d MiB (what analyze reads back); beyond it the oldest of the history goes first (counted)", record.MaxRecorderBytes>>20))
	fs.BoolVar(&f.redact, "redact", false, "pseudonymize addresses and host names in the bundles (as trace --redact)")
	fs.StringVar(&f.upload, "upload", "", "also upload every bundle to s3://BUCKET/PREFIX, under PREFIX/CLUSTER/NODE/, with the AWS SDK's default credentials (instance role, IRSA, EKS Pod Identity); a bundle stays in --bundle-dir until uploaded")
	f.uploadOpts.register(fs)
	f.registerCapture(fs, serveReadInterval, "each read is a device command")
	return cmd
}

func runServe(ctx context.Context, cmd *cobra.Command, f *serveFlags) error {
	if f.bundleDir == "" {
		return usagef("--bundle-dir is required: where the bundles go, e.g. --bundle-dir /var/lib/enaprobe")
	}
	if err := durationRange("history", f.history, time.Second, 10*time.Minute); err != nil {
		return err
	}
	if err := durationRange("after", f.after, 0, 5*time.Minute); err != nil {
		return err
	}
	if f.minGap < 0 {
		return usagef("--min-gap %v: must not be negative", f.minGap)
	}
	if f.snapshotGap < 0 {
		return usagef("--snapshot-gap %v: must not be negative", f.snapshotGap)
	}
	if f.maxBundles < 0 || f.maxBytes < 0 {
		return usagef("--max-bundles and --max-bytes must not be negative (0: no limit)")
	}
	// A bundle must read back within the reader's bound.
	if f.recorderBytes < 1<<20 || f.recorderBytes > record.MaxRecorderBytes {
		return usagef("--recorder-bytes %d: from 1 MiB to %d MiB, e.g. %d", f.recorderBytes, record.MaxRecorderBytes>>20, 64<<20)
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usagef("--listen %s: want host:port, e.g. 127.0.0.1:9464", f.listen)
	}
	if f.upload != "" {
		if _, err := upload.ParseURL(f.upload); err != nil {
			return usageError{err}
		}
	}
	if st, err := os.Stat(f.bundleDir); err == nil && !st.IsDir() {
		return usagef("--bundle-dir %s: is a file, not a directory", f.bundleDir)
	}
	cfg, aopts, log, err := prepareCapture(ctx, cmd, &f.traceFlags, func() error {
		if err := checkBundlePath(f.bundleDir); err != nil {
			return usagef("--bundle-dir %s: %v", f.bundleDir, strings.TrimPrefix(err.Error(), "-o "+f.bundleDir+": "))
		}
		return nil
	})
	if err != nil {
		return err
	}
	cfg.SampleBackoff = serveBackoff
	cfg.Notice = func(msg string) { log.Warn().Msg(msg) }

	snapshot := make(chan struct{}, 1)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for range usr1 {
			select {
			case snapshot <- struct{}{}:
			default:
			}
		}
	}()

	var up *upload.Config
	if f.upload != "" {
		c, err := f.uploadOpts.config(f.upload, cfg.Meta.InstanceType, log)
		if err != nil {
			return err
		}
		up = &c
	}
	err = agent.Run(ctx, agent.Config{
		Upload:        up,
		Capture:       cfg,
		Analysis:      aopts,
		Listen:        f.listen,
		BundleDir:     f.bundleDir,
		History:       f.history,
		After:         f.after,
		MinGap:        f.minGap,
		SnapshotAPI:   f.snapshotAPI,
		SnapshotGap:   f.snapshotGap,
		MaxBundles:    f.maxBundles,
		MaxBytes:      f.maxBytes,
		RecorderBytes: f.recorderBytes,
		Redact:        f.redact,
		CommandLine:   strings.Join(os.Args, " "),
		Log:           log,
		Snapshot:      snapshot,
		Ready: func(addr string) {
			f.capture.ready(addr, log)
		},
	})
	if err != nil {
		return setUpError(cmd, &f.traceFlags, err)
	}
	log.Info().Msg("detached; exiting")
	return nil
}
