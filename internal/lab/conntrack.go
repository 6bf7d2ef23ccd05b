package lab

import (
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCP conntrack states (enum tcp_conntrack) that conncount treats as gone.
const (
	tcpConntrackTimeWait = 7
	tcpConntrackClose    = 8
)

// trackedConnections counts the VPC namespace's conntrack entries the way
// nftables' `ct count` does (nf_conncount): confirmed entries, minus TCP
// connections in TIME_WAIT or CLOSE. conncount itself exposes no count (its
// dump shows only the limit) and the per-netns nf_conntrack_count would
// include closed TCP connections for two minutes, so the ctnetlink dump is
// the reading that agrees with what the cap enforces. Link-local service
// traffic is untracked and absent from the dump, as from the cap.
//
// The kernel walks its whole conntrack hash (shared by every namespace,
// 262144 buckets here) per dump, about 12 ms, so both families come from
// one AF_UNSPEC dump, and a trace's reads take the count from
// trackedGauge.
func (l *Lab) trackedConnections() (uint64, error) { return countTracked(l.vpcNl) }

// countTracked is trackedConnections on a handle in the VPC namespace.
func countTracked(nl *netlink.Handle) (uint64, error) {
	flows, err := nl.ConntrackTableList(netlink.ConntrackTable, unix.AF_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("dump conntrack table: %w", err)
	}
	var n uint64
	for _, f := range flows {
		if tcp, ok := f.ProtoInfo.(*netlink.ProtoInfoTCP); ok && (tcp.State == tcpConntrackTimeWait || tcp.State == tcpConntrackClose) {
			continue
		}
		n++
	}
	return n, nil
}

// gaugeMaxAge is how old a count of tracked connections a trace's read of
// the lab may return before the next is started. One count is a dump of
// the kernel's whole conntrack hash, about 12 ms, where the rest of a
// read takes half a millisecond (BenchmarkCountersRead): with the dump in
// every read, a read cost 25 times its counters' worth, reads could not
// come every 10 ms as a trace's do on a device, and a lagged source's
// poller spent a whole core on it. So conntrack_allowance_available runs
// up to this plus one dump late, as ENA's own gauge has been seen to
// (amzn-drivers issue 291); the counters of drops, which findings are
// timed by, stay as fresh as the read.
const gaugeMaxAge = 50 * time.Millisecond

// trackedGauge keeps the last count of tracked connections and starts the
// next in the background once it is gaugeMaxAge old: a read never waits
// for a dump but the first.
type trackedGauge struct {
	// nl is the gauge's own handle in the VPC namespace (handles are not
	// safe for concurrent use): used under mu for the first count, by the
	// one background dump after that.
	nl *netlink.Handle

	mu        sync.Mutex
	counted   bool // a count has succeeded
	value     uint64
	sampledNs int64 // the middle of the dump that counted value
	err       error // the last background dump's error, returned once
	dumping   bool
	closed    bool
	dumps     sync.WaitGroup
}

// read returns the last count, when it was taken (CLOCK_MONOTONIC), and
// starts the next count where it is older than gaugeMaxAge at nowNs.
func (g *trackedGauge) read(nowNs int64) (uint64, int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, 0, errLabClosed
	}
	if !g.counted {
		v, at, err := g.dump()
		if err != nil {
			return 0, 0, err
		}
		g.counted, g.value, g.sampledNs = true, v, at
	}
	if err := g.err; err != nil {
		g.err = nil
		return 0, 0, err
	}
	if nowNs-g.sampledNs > int64(gaugeMaxAge) && !g.dumping {
		g.dumping = true
		g.dumps.Add(1)
		go g.refresh()
	}
	return g.value, g.sampledNs, nil
}

func (g *trackedGauge) refresh() {
	defer g.dumps.Done()
	v, at, err := g.dump()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dumping = false
	if err != nil {
		g.err = err
		return
	}
	g.value, g.sampledNs = v, at
}

// dump counts the tracked connections, timed at the dump's middle.
func (g *trackedGauge) dump() (uint64, int64, error) {
	return timedRead(func() (uint64, error) { return countTracked(g.nl) })
}

// close waits for a dump under way and closes the handle; reads after it
// fail.
func (g *trackedGauge) close() {
	g.mu.Lock()
	was := g.closed
	g.closed = true
	g.mu.Unlock()
	if was {
		return
	}
	g.dumps.Wait()
	g.nl.Close()
}
