package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/counters"
	"github.com/enaprobe/enaprobe/ena"
)

type countersFlags struct {
	interfaces    []string
	interval      time.Duration
	count         int
	countersFiles []string
}

func newCountersCommand() *cobra.Command {
	f := &countersFlags{}
	cmd := &cobra.Command{
		Use:   "counters",
		Short: "Show the ENA allowance counters' deltas and rates live (watch ethtool -S, done right)",
		Long: `counters reads the allowance counters of every ENA interface at each interval
and prints what moved: the delta and the rate per second of each counter, and
the conntrack_allowance_available gauge. A counter that goes down is shown as
a reset (driver reset or failed read), never as a negative delta. No root
needed, no eBPF.`,
		Example: `  enaprobe counters
  enaprobe counters -i ens5 --interval 100ms --count 50
  enaprobe counters --counters-file eth0=/run/lab/counters.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCounters(cmd.Context(), cmd.OutOrStdout(), f) },
	}
	fs := cmd.Flags()
	fs.StringSliceVarP(&f.interfaces, "interface", "i", nil, "interface, repeatable (default: every interface whose driver is ena)")
	fs.DurationVar(&f.interval, "interval", time.Second, "time between reads")
	fs.IntVar(&f.count, "count", 0, "stop after this many intervals (0: until Ctrl-C)")
	fs.StringArrayVar(&f.countersFiles, "counters-file", nil, "[IFACE=]PATH: read IFACE's counters from a file in ethtool -S format")
	return cmd
}

// counterReader is one interface's source and its last values.
type counterReader struct {
	iface string
	src   ena.Source
	prev  map[string]uint64
	at    time.Time
}

func runCounters(ctx context.Context, w io.Writer, f *countersFlags) error {
	if f.interval < ena.MinInterval {
		return usagef("--interval %v: at least %v", f.interval, ena.MinInterval)
	}
	files, err := counterFiles(f.countersFiles, f.interfaces)
	if err != nil {
		return err
	}
	ifaces := f.interfaces
	if len(ifaces) == 0 {
		for name := range files {
			ifaces = append(ifaces, name)
		}
		if len(ifaces) == 0 {
			ifaces = enaInterfaces()
		}
	}
	if len(ifaces) == 0 {
		return usagef("no ENA interface here (driver ena) and no --counters-file: nothing to read")
	}
	var readers []*counterReader
	for _, name := range ifaces {
		src, ok := files[name]
		if !ok {
			es, err := ena.NewEthtoolSource(name)
			if err != nil {
				return fmt.Errorf("open counters of %s: %w", name, err)
			}
			defer es.Close()
			src = es
		}
		readers = append(readers, &counterReader{iface: name, src: src})
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range readers {
			if err := r.show(tw, time.Now(), i == 0); err != nil {
				return err
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if f.count > 0 && i >= f.count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// show reads once and prints one line per interface. The first read only
// sets the baseline and prints the absolute values.
func (r *counterReader) show(w io.Writer, now time.Time, first bool) error {
	vals, err := r.src.Read()
	if err != nil {
		fmt.Fprintf(w, "%s\t%s\tread failed: %v\n", now.Format("15:04:05.000"), r.iface, err)
		return nil
	}
	var cols []string
	for _, name := range counters.AllowanceExceeded {
		v, ok := vals[name]
		short := strings.TrimSuffix(name, "_allowance_exceeded")
		switch {
		case !ok:
			cols = append(cols, short+" absent")
		case first || r.prev == nil:
			cols = append(cols, fmt.Sprintf("%s %d", short, v))
		case v < r.prev[name]:
			cols = append(cols, fmt.Sprintf("%s reset(%d->%d)", short, r.prev[name], v))
		default:
			d := v - r.prev[name]
			rate := float64(d) / now.Sub(r.at).Seconds()
			cols = append(cols, fmt.Sprintf("%s +%d (%.0f/s)", short, d, rate))
		}
	}
	if v, ok := vals[counters.ConntrackAllowanceAvailable]; ok {
		cols = append(cols, fmt.Sprintf("conntrack_available %d", v))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\n", now.Format("15:04:05.000"), r.iface, strings.Join(cols, "\t"))
	r.prev, r.at = vals, now
	return nil
}

// enaInterfaces lists the interfaces whose driver is ena.
func enaInterfaces() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for _, i := range ifs {
		if d, _, err := ena.DriverInfo(i.Name); err == nil && ena.IsENA(d) {
			out = append(out, i.Name)
		}
	}
	return out
}
