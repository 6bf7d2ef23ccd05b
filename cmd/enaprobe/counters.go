package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/record"
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
a reset, never as a negative delta; a read the driver failed (an error, or
every device counter zero after nonzero values) is shown as a failed read and
skipped, as a trace does. No root needed, no eBPF.

At the end (--count, or Ctrl-C) it says how often the device refreshed what
the reads returned, as a trace learns it, where the counters and the gauge
changed often enough to tell: read at a short --interval on a busy interface,
then give the refresh to trace and analyze as --counter-refresh.`,
		Example: `  enaprobe counters
  enaprobe counters -i ens5 --interval 100ms --count 50
  enaprobe counters -i ens5 --interval 10ms --count 3000   # then: how often it refreshes
  enaprobe counters --counters-file eth0=/run/lab/counters.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCounters(cmd.Context(), cmd.OutOrStdout(), f) },
	}
	fs := cmd.Flags()
	fs.StringSliceVarP(&f.interfaces, "interface", "i", nil, "interface, repeatable (default: every interface whose driver is ena)")
	fs.DurationVar(&f.interval, "interval", time.Second, "time between reads, a duration, e.g. 1s or 100ms")
	fs.IntVar(&f.count, "count", 0, "stop after this many intervals, e.g. 10 (0: until Ctrl-C)")
	fs.StringArrayVar(&f.countersFiles, "counters-file", nil, "[IFACE=]PATH: read IFACE's counters from a file in ethtool -S format")
	return cmd
}

// counterReader is one interface's source and its last successful read.
type counterReader struct {
	iface string
	src   ena.Source
	prev  *record.CounterSample
	start time.Time // the origin of the samples' clock
	// reads are the latest reads, up to maxRefreshReads, the refresh is
	// learned from.
	reads []record.CounterSample
}

// maxRefreshReads is how many of the latest reads an interface's refresh
// is learned from: 10 minutes at the default interval, 30 s at 10 ms.
const maxRefreshReads = 3000

func runCounters(ctx context.Context, w io.Writer, f *countersFlags) error {
	if f.interval < ena.MinInterval {
		return usagef("--interval %v: at least %v, e.g. 1s", f.interval, ena.MinInterval)
	}
	if f.count < 0 {
		return usagef("--count %d: want a number of intervals, or 0 for until Ctrl-C", f.count)
	}
	f.interfaces = dedupe(f.interfaces)
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
	start := time.Now()
	var readers []*counterReader
	for _, name := range ifaces {
		src, ok := files[name]
		if !ok {
			if err := interfacesExist([]string{name}); err != nil {
				return err
			}
			if err := hasAllowanceCounters(name); err != nil {
				return err
			}
			es, err := ena.NewEthtoolSource(name)
			if err != nil {
				return fmt.Errorf("open counters of %s: %w", name, err)
			}
			defer es.Close()
			src = es
		}
		readers = append(readers, &counterReader{iface: name, src: src, start: start})
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
reads:
	for i := 0; ; i++ {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, r := range readers {
			r.show(tw, time.Now())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if f.count > 0 && i >= f.count {
			break
		}
		select {
		case <-ctx.Done():
			break reads
		case <-tick.C:
		}
	}
	for _, r := range readers {
		fmt.Fprintln(w, r.refreshText(f.interval))
	}
	return nil
}

// refreshText says how often the device refreshed what r's reads
// returned, as a trace learns it (analyzer.LearnRefresh), and what to give
// a trace for it.
func (r *counterReader) refreshText(interval time.Duration) string {
	refresh, changes, known := analyzer.LearnRefresh(r.reads, r.iface)
	switch {
	case known && refresh > 0:
		d := refresh.Round(time.Millisecond)
		return fmt.Sprintf("%s: the counters changed at most once per %v (learned from %d changes): give trace and analyze --counter-refresh %v", r.iface, d, changes, d)
	case known && interval <= ena.DefaultInterval:
		return fmt.Sprintf("%s: the counters changed at successive reads %v apart (%d changes): the device shows a change at the next read; give trace and analyze --counter-refresh 0", r.iface, interval, changes)
	case known:
		return fmt.Sprintf("%s: the counters changed at successive reads %v apart (%d changes): they refresh at least that often; read at a shorter --interval, e.g. 10ms, to learn how often", r.iface, interval, changes)
	}
	return fmt.Sprintf("%s: the counters changed %d times, too few or too unevenly to tell how often the device refreshes them; read longer, at a short --interval, while the interface is busy", r.iface, changes)
}

// read takes one sample on the clock of r.start.
func (r *counterReader) read() record.CounterSample {
	s := record.CounterSample{Interface: r.iface, BeforeNs: int64(time.Since(r.start))}
	vals, err := r.src.Read()
	s.AfterNs = int64(time.Since(r.start))
	if err != nil {
		s.Err = err.Error()
	} else {
		s.Values = vals
	}
	return s
}

// show reads once and prints one line. The first successful read prints
// the absolute values; later ones what counters.Diff (the trace's own rule)
// makes of the last successful read and this one: a jump as +delta and a
// rate, a counter that went down as a reset, and a read the driver failed
// (an error, or device counters all zero after nonzero ones) as a failed
// read that is skipped.
func (r *counterReader) show(w io.Writer, now time.Time) {
	cur := r.read()
	if r.reads = append(r.reads, cur); len(r.reads) > maxRefreshReads {
		r.reads = slices.Delete(r.reads, 0, len(r.reads)-maxRefreshReads)
	}
	stamp := now.Format("15:04:05.000")
	samples := []record.CounterSample{cur}
	if r.prev != nil {
		samples = []record.CounterSample{*r.prev, cur}
	}
	ch := counters.Diff(samples)
	for _, f := range ch.Failed {
		if f.BeforeNs == cur.BeforeNs {
			fmt.Fprintf(w, "%s\t%s\tread failed: %s\n", stamp, r.iface, f.Reason)
			return
		}
	}
	var cols []string
	for _, name := range counters.AllowanceExceeded {
		v, ok := cur.Values[name]
		short := strings.TrimSuffix(name, "_allowance_exceeded")
		switch {
		case !ok:
			cols = append(cols, short+" absent")
		case r.prev == nil:
			cols = append(cols, fmt.Sprintf("%s %d", short, v))
		default:
			cols = append(cols, changeText(ch, name, short, float64(cur.AfterNs-r.prev.AfterNs)/1e9))
		}
	}
	if v, ok := cur.Values[counters.ConntrackAllowanceAvailable]; ok {
		cols = append(cols, fmt.Sprintf("conntrack_available %d", v))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\n", stamp, r.iface, strings.Join(cols, "\t"))
	r.prev = &cur
}

// changeText says what one counter did between two successful reads.
func changeText(ch counters.Changes, name, short string, seconds float64) string {
	for _, rs := range ch.Resets {
		if rs.Name == name {
			return fmt.Sprintf("%s reset(%d->%d)", short, rs.From, rs.To)
		}
	}
	var d uint64
	for _, j := range ch.Jumps {
		if j.Name == name {
			d += j.Delta
		}
	}
	return fmt.Sprintf("%s +%d (%.0f/s)", short, d, float64(d)/max(seconds, 1e-9))
}

// enaInterfaces lists the interfaces whose driver is ena.
// hasAllowanceCounters refuses an interface whose driver is not ENA: only
// the ena driver has the allowance counters, so reading it would print
// "absent" at every interval forever.
func hasAllowanceCounters(name string) error {
	driver, _, err := ena.DriverInfo(name)
	switch {
	case err != nil:
		return usagef("%s reports no driver (%v): no allowance counters; only ENA interfaces have them (or give --counters-file %s=PATH, a file in ethtool -S format)",
			name, err, name)
	case !ena.IsENA(driver):
		return usagef("%s is %s: no allowance counters; only ENA interfaces have them (or give --counters-file %s=PATH, a file in ethtool -S format)",
			name, driver, name)
	}
	return nil
}

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
