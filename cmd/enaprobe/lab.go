//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
)

func newLabCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Reproduce EC2 network allowances on any Linux machine, with real kernel shaping",
		Long: `lab builds an "instance" network namespace whose interface (ens5) leads to a
"VPC" namespace that enforces scaled-down EC2 allowances with real kernel
machinery (tbf and htb for bandwidth and the per-flow cap, nftables for packets/s,
link-local packets/s and connection tracking) and serves IMDS, DNS and NTP on
their link-local addresses. Its counters carry the ENA names. Nothing leaves
the two namespaces. Needs root.`,
	}
	cmd.AddCommand(newLabRunCommand(), newLabListCommand(), newLabUpCommand(), newLabDownCommand())
	return cmd
}

func newLabListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range catalog.All() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-17s %s\n%-17s expect: %s\n", s.Name, s.Summary, "", s.Expect)
			}
			return nil
		},
	}
}

// labFlags override the lab's allowances; only flags given change anything.
type labFlags struct {
	fs                              *pflag.FlagSet
	outRate, inRate, flowRate       float64
	outBurst, inBurst               uint32
	pps, linkLocalPPS, conntrackMax uint32
	hopLimit                        int
}

func (f *labFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.Var(rateValue{&f.outRate}, "out-rate", "aggregate outbound allowance, a rate with its unit, e.g. 40Mbit (default 40Mbit)")
	fs.Var(rateValue{&f.inRate}, "in-rate", "aggregate inbound allowance, a rate with its unit, e.g. 40Mbit (default 40Mbit)")
	fs.Var(bytesValue{&f.outBurst}, "out-burst", "outbound burst bucket, a size with its unit, e.g. 360kB or 4MiB: sent at link speed before --out-rate applies (default 1MiB)")
	fs.Var(bytesValue{&f.inBurst}, "in-burst", "inbound burst bucket, a size with its unit, e.g. 360kB or 4MiB (default 1MiB)")
	fs.Var(rateValue{&f.flowRate}, "flow-rate", "per-flow cap, a rate with its unit, e.g. 20Mbit (default 10Mbit)")
	fs.Uint32Var(&f.pps, "pps", 0, "packets/s allowance, both directions, e.g. 8000 (default 8000)")
	fs.Uint32Var(&f.linkLocalPPS, "linklocal-pps", 0, "link-local packets/s allowance, e.g. 1024 (default 1024, as on EC2)")
	fs.Uint32Var(&f.conntrackMax, "conntrack-max", 0, "tracked connections allowed, e.g. 1024 (default 1024)")
	fs.IntVar(&f.hopLimit, "imds-hop-limit", 0, "IP TTL of the IMDS token response (default 1)")
}

func (f *labFlags) apply(c lab.Config) lab.Config {
	set := func(name string) bool { return f.fs.Changed(name) }
	if set("out-rate") {
		c.OutRate = uint64(f.outRate)
	}
	if set("in-rate") {
		c.InRate = uint64(f.inRate)
	}
	if set("out-burst") {
		c.OutBurst = f.outBurst
	}
	if set("in-burst") {
		c.InBurst = f.inBurst
	}
	if set("flow-rate") {
		c.FlowRate = uint64(f.flowRate)
	}
	if set("pps") {
		c.PPS = f.pps
	}
	if set("linklocal-pps") {
		c.LinkLocalPPS = f.linkLocalPPS
	}
	if set("conntrack-max") {
		c.ConntrackMax = f.conntrackMax
	}
	if set("imds-hop-limit") {
		c.IMDSHopLimit = f.hopLimit
	}
	return c
}

type labRunFlags struct {
	truthFile      string
	counterLag     time.Duration
	counterRefresh time.Duration
	allowance      string
	window         time.Duration
	capture        captureFlags
	lab            labFlags
	out            outputFlags
}

func newLabRunCommand() *cobra.Command {
	f := &labRunFlags{}
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario in the lab and report on it (enaprobe lab list names them)",
		Example: `  sudo enaprobe lab run micro-burst
  sudo enaprobe lab run link-local --format json -o /tmp/ll
  sudo enaprobe lab run flow-at-cap --flow-rate 20Mbit`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: catalog.Names(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLabScenario(cmd.Context(), cmd, args[0], f)
		},
	}
	fs := cmd.Flags()
	f.capture.register(fs, ena.DefaultInterval, "as a trace's; a scenario may set its own")
	registerWindow(fs, &f.window)
	fs.DurationVar(&f.counterLag, "emulate-counter-lag", 0, "make the lab's counters show a drop this long after it happened, a duration from 0 to 5s, e.g. 30ms (default: the scenario's)")
	fs.DurationVar(&f.counterRefresh, "counter-refresh", 0, "make the lab's counters change only every this long, at a random phase, a duration from 0 to 5s, e.g. 1s (default: the scenario's, 0: at every poll)")
	fs.StringVar(&f.allowance, "allowance", "given", "given: analyse with the lab's allowances; unknown: without them (bandwidth and packets/s), as on an instance whose allowances nobody published")
	fs.StringVar(&f.truthFile, "truth-file", "", "write what the traffic generators did (culprit, burst times on CLOCK_MONOTONIC) as JSON")
	f.lab.register(fs)
	f.out.register(fs)
	return cmd
}

func runLabScenario(ctx context.Context, cmd *cobra.Command, name string, f *labRunFlags) error {
	s, ok := catalog.Lookup(name)
	if !ok {
		return usagef("no scenario %q: choose one of %s", name, strings.Join(catalog.Names(), ", "))
	}
	if err := f.out.validate(); err != nil {
		return err
	}
	mode, err := f.capture.check()
	if err != nil {
		return err
	}
	log := newLogger(cmd.ErrOrStderr(), "info", false)
	window, err := f.capture.fineWindow(f.window, log)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return privilegeError{fmt.Errorf("the lab needs root: run it with sudo")}
	}
	if err := checkBundlePath(f.out.output); err != nil {
		return err
	}
	base := s.Lab
	s.Lab = func() lab.Config { return f.lab.apply(base()) }
	cfg := capture.DefaultConfig()
	cfg.Attach = mode
	cfg.SampleInterval = f.capture.sampleInterval
	if cmd.Flags().Changed("emulate-counter-lag") {
		if f.counterLag < 0 || f.counterLag > 5*time.Second {
			return usagef("--emulate-counter-lag %v: want 0 to 5s", f.counterLag)
		}
		s.CounterLag = f.counterLag
	}
	if cmd.Flags().Changed("counter-refresh") {
		if f.counterRefresh < 0 || f.counterRefresh > 5*time.Second {
			return usagef("--counter-refresh %v: want 0 to 5s", f.counterRefresh)
		}
		s.CounterRefresh = f.counterRefresh
	}
	if f.allowance != "given" && f.allowance != "unknown" {
		return usagef("--allowance %q: want given or unknown", f.allowance)
	}
	if s.SampleInterval > 0 && !cmd.Flags().Changed("sample-interval") {
		cfg.SampleInterval = s.SampleInterval
	}
	cfg.Datapath.Bucket = f.capture.bucket
	cfg.Datapath.Window = window
	cfg.Meta.Version = version
	cfg.Attached = func() { f.capture.ready(strconv.Itoa(os.Getpid()), log) }
	log.Info().Str("scenario", s.Name).Str("expect", s.Expect).Msg("running")
	out, err := catalog.Run(ctx, s, cfg)
	if err != nil {
		return err
	}
	ev := log.Info()
	if out.Truth.Culprit.IsValid() {
		ev = ev.Str("culprit", out.Truth.Culprit.String())
	}
	for i, b := range out.Truth.Bursts {
		ev = ev.Float64(fmt.Sprintf("burst%d_offset_s", i+1), float64(b.StartNs-out.Recording.Meta.Start.MonoNs)/1e9)
	}
	ev.Strs("notes", out.Truth.Notes).Msg("scenario done")
	if out.Interrupted {
		log.Warn().Msg("interrupted: the report covers what ran until then")
	}
	if f.truthFile != "" {
		b, err := json.MarshalIndent(out.Truth, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.truthFile, b, 0o644); err != nil {
			return fmt.Errorf("write truth file: %w", err)
		}
	}
	opts := out.Analysis
	if f.allowance == "unknown" {
		opts = out.WithoutAllowances()
	}
	return writeReports(cmd.OutOrStdout(), out.Recording, opts, f.out, environment(out.Recording, strings.Join(os.Args, " ")), log)
}
