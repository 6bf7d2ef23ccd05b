// Command enaprobe is an eBPF packet profiler for EC2 hosts: it lines up
// the ENA allowance counters with per-flow traffic at microsecond resolution
// and says which burst, flow or process hit which limit, and what to do.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/internal/capture"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes, documented in the README ("Exit codes").
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitPrivileges = 3
)

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// privilegeError marks a missing privilege or kernel feature.
type privilegeError struct{ err error }

func (e privilegeError) Error() string { return e.err.Error() }
func (e privilegeError) Unwrap() error { return e.err }

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	nameCommand(cmd, err)
	fmt.Fprintf(os.Stderr, "enaprobe: %+v\n", err)
	return exitCode(err)
}

// nameCommand puts the command that was run into the errors that name it,
// so `serve` without privileges says "enaprobe serve needs ...".
func nameCommand(cmd *cobra.Command, err error) {
	var mc *capture.MissingCapabilitiesError
	if cmd != nil && errors.As(err, &mc) && mc.Command == "" {
		mc.Command = cmd.CommandPath()
	}
}

func exitCode(err error) int {
	var ue usageError
	var pe privilegeError
	var mc *capture.MissingCapabilitiesError
	var se *capture.SeccompError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &pe), errors.As(err, &mc), errors.As(err, &se):
		return exitPrivileges
	}
	return exitError
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "enaprobe",
		Short: "eBPF packet profiler for EC2: which burst, flow or process hit which network allowance",
		Long: `enaprobe counts wire packets, bytes and new TCP connections per flow and per
link-local service in microsecond buckets with eBPF on tc, samples the ENA
allowance counters (ethtool -S) at high rate, and lines the two up: the
report names the micro-bursts, the flows pinned at the per-flow cap, the
link-local offenders and the connection floods, with time, culprit,
evidence and a fix.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if cmd.Name() != "serve" {
				limitHeap()
			}
		},
	}
	// --version prints what `enaprobe version` prints.
	root.SetVersionTemplate("enaprobe {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{explainFlagError(cmd, err)} })
	root.AddCommand(newTraceCommand(), newServeCommand(), newAnalyzeCommand(), newCountersCommand(), newVersionCommand(), newLabCommand(), newCleanupCommand(), newSeccompCommand())
	argsAreUsage(root)
	return root
}

// argsAreUsage makes every argument error a usage error (exit 2): a command
// group given an unknown command, and a command given the wrong arguments.
func argsAreUsage(c *cobra.Command) {
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
	if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("unknown command %q for %q: see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usagef("%s: %v (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
			}
			return nil
		}
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "enaprobe", version)
			return err
		},
	}
}

// oneShotHeapLimit is the Go heap a trace, analyze or lab run aims to stay
// under. Their peak is the end of a run, where the analysis and the reports
// make garbage: with the default GOGC the heap grows to twice what is live
// before a collection (a trace of 195,000 flows: 65 MB live, 131 MB of
// heap, 166 MiB of RSS). A soft limit collects sooner instead; over it
// (a recording that really holds more) the runtime spends at most half a
// core collecting, never fails for it. serve runs without it: its heap is
// its flight recorder's, bounded by --recorder-bytes. GOMEMLIMIT, when
// set, overrides it.
const oneShotHeapLimit = 96 << 20

func limitHeap() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(oneShotHeapLimit)
	}
}
