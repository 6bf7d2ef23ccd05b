package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// CounterNames lists the emulated counters in ethtool order.
var CounterNames = append(append([]string(nil), counters.AllowanceExceeded...), counters.ConntrackAllowanceAvailable)

// Counters returns the Source a trace reads: the emulated ENA counters
// from the kernel machinery that enforces each allowance. Every read of
// the drop counters is fresh: two qdisc dumps and the nftables counters
// over netlink, about half a millisecond on a 2-core VM
// (BenchmarkCountersRead), so it can be read every 10 ms as a device is.
// conntrack_allowance_available comes from a count at most gaugeMaxAge
// old (trackedGauge says why).
func (l *Lab) Counters() ena.Source { return counterSource{l} }

// ReadCounters reads every counter now, the tracked connections counted
// for this read: what a test's or a scenario's before and after need.
func (l *Lab) ReadCounters() (map[string]uint64, error) {
	v, _, err := l.readCounters(true)
	return v, err
}

type counterSource struct{ l *Lab }

// errLabClosed is what a counter read of a closed lab returns.
var errLabClosed = errors.New("read lab counters: lab closed")

func (counterSource) Kind() string { return "lab" }

func (s counterSource) Read() (map[string]uint64, error) {
	v, _, err := s.l.readCounters(false)
	return v, err
}

// readCounters reads every emulated counter; sampled is when each value
// was taken (CLOCK_MONOTONIC), the middle of the dump that returned it
// (of the two dumps' middles for a sum of two): under load a read takes
// tens of ms, and a value is as old as its own dump, not the read's start.
// exact counts the tracked connections in this read; otherwise they come
// from trackedGauge.
func (l *Lab) readCounters(exact bool) (values map[string]uint64, sampled map[string]int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, nil, errLabClosed
	}
	// The nftables dump and an exact conntrack count take a while each:
	// overlap.
	type nftResult struct {
		counters map[string]uint64
		sampled  map[string]int64
		err      error
	}
	nftDone := make(chan nftResult, 1)
	go func() {
		c, at, err := l.nftCounters()
		nftDone <- nftResult{c, at, err}
	}()
	out, outAt, outErr := timedRead(func() (uint64, error) { return shaperHeldBack(l.instNl, l.instLink) })
	in, inAt, inErr := timedRead(func() (uint64, error) { return shaperHeldBack(l.vpcNl, l.vpcLink) })
	var tracked uint64
	var trackedAt int64
	var ctErr error
	if exact {
		tracked, trackedAt, ctErr = timedRead(l.trackedConnections)
	} else {
		tracked, trackedAt, ctErr = l.gauge.read(monoclock.Now())
	}
	nftRes := <-nftDone
	if outErr != nil {
		return nil, nil, fmt.Errorf("read %s: %w", counters.BwOutAllowanceExceeded, outErr)
	}
	if inErr != nil {
		return nil, nil, fmt.Errorf("read %s: %w", counters.BwInAllowanceExceeded, inErr)
	}
	if ctErr != nil {
		return nil, nil, fmt.Errorf("read %s: %w", counters.ConntrackAllowanceAvailable, ctErr)
	}
	if nftRes.err != nil {
		return nil, nil, fmt.Errorf("read nftables counters: %w", nftRes.err)
	}
	nft, nftAt := nftRes.counters, nftRes.sampled
	for _, name := range []string{nftPPSExceeded, nftLinkLocalExceeded, nftConntrackExceeded, nftBWInExceeded, nftBWOutExceeded} {
		if _, ok := nft[name]; !ok {
			return nil, nil, fmt.Errorf("read nftables counters: %s missing", name)
		}
	}
	available := uint64(0)
	if max := uint64(l.cfg.ConntrackMax); tracked < max {
		available = max - tracked
	}
	return map[string]uint64{
			// Offered over the allowance (counted as the packets arrive, as an
			// ENA counts them when it queues them), plus held back by the
			// shaper: a local sender is throttled by the qdisc's backpressure,
			// so a sustained overload shows there rather than as offered load.
			counters.BwInAllowanceExceeded:       nft[nftBWInExceeded] + in,
			counters.BwOutAllowanceExceeded:      nft[nftBWOutExceeded] + out,
			counters.PPSAllowanceExceeded:        nft[nftPPSExceeded],
			counters.ConntrackAllowanceExceeded:  nft[nftConntrackExceeded],
			counters.LinklocalAllowanceExceeded:  nft[nftLinkLocalExceeded],
			counters.ConntrackAllowanceAvailable: available,
		}, map[string]int64{
			counters.BwInAllowanceExceeded:       (nftAt[nftBWInExceeded] + inAt) / 2,
			counters.BwOutAllowanceExceeded:      (nftAt[nftBWOutExceeded] + outAt) / 2,
			counters.PPSAllowanceExceeded:        nftAt[nftPPSExceeded],
			counters.ConntrackAllowanceExceeded:  nftAt[nftConntrackExceeded],
			counters.LinklocalAllowanceExceeded:  nftAt[nftLinkLocalExceeded],
			counters.ConntrackAllowanceAvailable: trackedAt,
		}, nil
}

// timedRead runs read and says when its value was taken
// (CLOCK_MONOTONIC): the middle of the read.
func timedRead(read func() (uint64, error)) (uint64, int64, error) {
	start := monoclock.Now()
	v, err := read()
	return v, start + (monoclock.Now()-start)/2, err
}

// FormatEthtool renders counters as `ethtool -S` prints them: a header line
// then one indented "name: value" line each, known names in ethtool order.
func FormatEthtool(values map[string]uint64) string {
	var b strings.Builder
	b.WriteString("NIC statistics:\n")
	for _, name := range CounterNames {
		if v, ok := values[name]; ok {
			fmt.Fprintf(&b, "     %s: %d\n", name, v)
		}
	}
	return b.String()
}

// WriteCountersFile reads the counters and writes them to path in `ethtool
// -S` format, for enaprobe's --counters-file. The file is replaced by a
// rename, so a concurrent reader sees the old or the new reading, whole.
func (l *Lab) WriteCountersFile(path string) error {
	values, _, err := l.readCounters(false)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write counters file: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.WriteString(FormatEthtool(values)); err != nil {
		tmp.Close()
		return fmt.Errorf("write counters file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write counters file %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write counters file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write counters file: %w", err)
	}
	return nil
}
