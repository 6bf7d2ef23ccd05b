//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/units"
)

type labUpFlags struct {
	duration     time.Duration
	countersFile string
	lab          labFlags
}

func newLabUpCommand() *cobra.Command {
	f := &labUpFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Keep a lab running, writing its counters to a file, to trace it by hand",
		Long: `up builds a lab and keeps it until Ctrl-C, --duration or "enaprobe lab down",
rewriting its counters every 100 ms in ethtool -S format. It prints the
commands to trace it (with the lab's allowances as the trace's limits) and to
make traffic from the instance namespace.`,
		Example: `  sudo enaprobe lab up --counters-file /tmp/lab-counters.txt --out-burst 360kB
  # in another terminal, the trace command "up" printed, e.g.:
  sudo ip netns exec enalab-XXXX-inst /path/to/enaprobe trace -i ens5 --counters-file /tmp/lab-counters.txt --no-imds --baseline 40Mbit --flow-limit 10Mbit --pps-allowance 8000
  sudo enaprobe lab down`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLabUp(cmd.Context(), cmd, f) },
	}
	fs := cmd.Flags()
	fs.DurationVar(&f.duration, "duration", time.Hour, "how long to keep the lab, a duration, e.g. 1h or 10m")
	fs.StringVar(&f.countersFile, "counters-file", "/run/enaprobe-lab-counters.txt", "where to write the counters")
	f.lab.register(fs)
	return cmd
}

func newLabDownCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: `Remove what "lab up" made: stop running labs, remove what killed ones left`,
		Long: `down stops every lab "enaprobe lab up" keeps (it removes its namespaces, links,
rules and counters file on its way out) and removes what a killed one left:
its namespaces and counters file. With nothing to remove it says so and
succeeds, so it is safe to run twice. Labs of "lab run" and of tests are not
touched.`,
		Example: `  sudo enaprobe lab down`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return privilegeError{errors.New("the lab needs root: run it with sudo")}
			}
			return labDown(cmd.Context(), cmd.OutOrStdout())
		},
	}
}

// labStateDir holds one file per running "lab up", so "lab down" finds it.
// Tests move it (labStateDirEnv), so their "lab down" never stops a user's
// lab.
var labStateDir = cmp.Or(os.Getenv(labStateDirEnv), "/run/enaprobe-lab")

const labStateDirEnv = "ENAPROBE_LAB_STATE_DIR"

// labState is what "lab down" needs of a "lab up".
type labState struct {
	ID           string   `json:"id"`
	PID          int      `json:"pid"`
	Namespaces   []string `json:"namespaces"`
	CountersFile string   `json:"counters_file"`
}

func (s labState) path() string { return filepath.Join(labStateDir, s.ID+".json") }

func runLabUp(ctx context.Context, cmd *cobra.Command, f *labUpFlags) error {
	if os.Geteuid() != 0 {
		return privilegeError{fmt.Errorf("the lab needs root: run it with sudo")}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("path of this binary: %w", err)
	}
	l, err := lab.Up(ctx, f.lab.apply(lab.DefaultConfig()))
	if err != nil {
		return err
	}
	defer l.Close()
	state := labState{ID: l.ID(), PID: os.Getpid(), Namespaces: []string{l.InstanceNetns(), l.VPCNetns()}, CountersFile: f.countersFile}
	if err := writeLabState(state); err != nil {
		return err
	}
	defer os.Remove(state.path())
	if err := l.WriteCountersFile(f.countersFile); err != nil {
		return err
	}
	printLabUp(cmd.OutOrStdout(), l, self, f.countersFile)
	ctx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return os.Remove(f.countersFile)
		case <-tick.C:
			if err := l.WriteCountersFile(f.countersFile); err != nil {
				return err
			}
		}
	}
}

// printLabUp says what the lab is and the commands that use it, pasteable:
// the binary by its path (sudo's PATH rarely has it), the limits as the
// trace's flags take them, every allowance the trace can compare with.
func printLabUp(w io.Writer, l *lab.Lab, self, countersFile string) {
	c := l.Config()
	fmt.Fprintf(w, `lab %s is up: instance namespace %s, interface %s
  allowances: out %s (burst %s), in %s (burst %s), per flow %s, %d pps, %d link-local pps, %d connections
  trace it:   sudo ip netns exec %s %s trace -i %s --counters-file %s --no-imds --baseline %s --flow-limit %s --pps-allowance %d
  traffic:    sudo ip netns exec %s ping -c 3 %s
Ctrl-C or "sudo %s lab down" removes it.
`, l.ID(), l.InstanceNetns(), l.InstanceInterface(),
		units.BitRate(float64(c.OutRate)), formatBytesFlag(uint64(c.OutBurst)),
		units.BitRate(float64(c.InRate)), formatBytesFlag(uint64(c.InBurst)),
		units.BitRate(float64(c.FlowRate)), c.PPS, c.LinkLocalPPS, c.ConntrackMax,
		l.InstanceNetns(), self, l.InstanceInterface(), countersFile, formatRateFlag(c.OutRate), formatRateFlag(c.FlowRate), c.PPS,
		l.InstanceNetns(), lab.PeerAddr, self)
}

func writeLabState(s labState) error {
	if err := os.MkdirAll(labStateDir, 0o755); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.path(), b, 0o644); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// labDown stops every running "lab up" (SIGTERM: it closes its lab) and
// removes what killed ones left.
func labDown(ctx context.Context, w io.Writer) error {
	paths, err := filepath.Glob(filepath.Join(labStateDir, "*.json"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		fmt.Fprintln(w, `no lab of "enaprobe lab up" here: nothing to remove`)
		return nil
	}
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // it went down meanwhile
		}
		var s labState
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lab state %s: %w", p, err))
			continue
		}
		errs = append(errs, takeDown(ctx, w, s))
	}
	return errors.Join(errs...)
}

func takeDown(ctx context.Context, w io.Writer, s labState) error {
	if isLabUp(s.PID) {
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop lab %s (PID %d): %w", s.ID, s.PID, err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for isLabUp(s.PID) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("lab %s (PID %d) did not stop within 15s", s.ID, s.PID)
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprintf(w, "lab %s: stopped (PID %d)\n", s.ID, s.PID)
	}
	// What a killed lab left; after a clean stop, nothing.
	removed, err := lab.RemoveNamespaces(s.ID)
	for _, n := range removed {
		fmt.Fprintf(w, "lab %s: removed namespace %s\n", s.ID, n)
	}
	if err != nil {
		return fmt.Errorf("lab %s: %w", s.ID, err)
	}
	if s.CountersFile != "" {
		if err := os.Remove(s.CountersFile); err == nil {
			fmt.Fprintf(w, "lab %s: removed %s\n", s.ID, s.CountersFile)
		}
	}
	if err := os.Remove(s.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fmt.Fprintf(w, "lab %s: down\n", s.ID)
	return nil
}

// isLabUp tells whether pid is a running "lab up" (not a process that got
// its PID after a lab up was killed).
func isLabUp(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "lab" && args[i+1] == "up" {
			return true
		}
	}
	return false
}
