package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// CounterNames lists the emulated counters in ethtool order.
var CounterNames = append(append([]string(nil), counters.AllowanceExceeded...), counters.ConntrackAllowanceAvailable)

// Counters returns a Source reading the emulated ENA counters from the
// kernel machinery that enforces each allowance. Every read is fresh: two
// qdisc dumps, one conntrack dump and the nftables counters over netlink,
// about 3 ms on a 2-core VM (BenchmarkCountersRead; the conntrack dump
// dominates, see trackedConnections).
func (l *Lab) Counters() ena.Source { return counterSource{l} }

type counterSource struct{ l *Lab }

// errLabClosed is what a counter read of a closed lab returns.
var errLabClosed = errors.New("read lab counters: lab closed")

func (counterSource) Kind() string { return "lab" }

func (s counterSource) Read() (map[string]uint64, error) { return s.l.readCounters() }

func (l *Lab) readCounters() (map[string]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil, errLabClosed
	}
	// The nftables and conntrack dumps take milliseconds each: overlap.
	type nftResult struct {
		counters map[string]uint64
		err      error
	}
	nftDone := make(chan nftResult, 1)
	go func() {
		c, err := l.nftCounters()
		nftDone <- nftResult{c, err}
	}()
	out, outErr := shaperHeldBack(l.instNl, l.instLink)
	in, inErr := shaperHeldBack(l.vpcNl, l.vpcLink)
	tracked, ctErr := l.trackedConnections()
	nftRes := <-nftDone
	if outErr != nil {
		return nil, fmt.Errorf("read %s: %w", counters.BwOutAllowanceExceeded, outErr)
	}
	if inErr != nil {
		return nil, fmt.Errorf("read %s: %w", counters.BwInAllowanceExceeded, inErr)
	}
	if ctErr != nil {
		return nil, fmt.Errorf("read %s: %w", counters.ConntrackAllowanceAvailable, ctErr)
	}
	if nftRes.err != nil {
		return nil, fmt.Errorf("read nftables counters: %w", nftRes.err)
	}
	nft := nftRes.counters
	for _, name := range []string{nftPPSExceeded, nftLinkLocalExceeded, nftConntrackExceeded, nftBWInExceeded, nftBWOutExceeded} {
		if _, ok := nft[name]; !ok {
			return nil, fmt.Errorf("read nftables counters: %s missing", name)
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
	}, nil
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
	values, err := l.readCounters()
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
