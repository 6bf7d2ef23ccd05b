//go:build linux

package loader

import (
	"github.com/enaprobe/enaprobe/bpf"
)

// Take returns what the collector gathered since the last Take (or since it
// started) and forgets it, so that a collector that runs for days holds
// only what one drain brought. Totals and Loss stay cumulative. A bucket
// swept again after a Take (a straggler) comes in a later Take with the
// same StartNs: the reader adds the two.
func (c *Collector) Take() Result {
	r := c.Result()
	for d := range c.series {
		c.series[d] = chunkedSeries{}
	}
	c.sizes, c.snapshots, c.windows, c.origins, c.imds, c.payloads = nil, nil, nil, nil, nil, nil
	return r
}

// PruneFlows forgets the flows that left the flow tables (evicted idle) and
// were last seen before beforeNs. The collector keeps the past of an
// evicted flow in case it comes back; a long-running reader bounds that
// memory this way. A pruned flow that comes back restarts its cumulative
// counters. It returns how many flows it forgot.
func (c *Collector) PruneFlows(beforeNs int64) int {
	n := 0
	for sk, fs := range c.flows {
		if fs.last.Packets != 0 {
			continue // in the table at the last scan
		}
		if int64(fs.past().LastSeenNs) < beforeNs {
			delete(c.flows, sk)
			n++
		}
	}
	return n
}

// Health is the state of the datapath's bounded memory at the last drain.
type Health struct {
	// FlowTableFill is the share of the flow tables' slots holding a flow.
	FlowTableFill float64
	// RingUse is how far behind the collector was at its last drain, as a
	// share of the bucket ring: at 1 buckets are overwritten before read.
	RingUse float64
}

// Health reads the flow tables' fill and the bucket ring's use. It walks
// the used-bucket maps, not the tables.
func (c *Collector) Health(nowNs int64) Health {
	var h Health
	if c.table != nil {
		used, total := 0, len(c.table.b4)*len(c.table.b4[0].Ways)+len(c.table.b6)*len(c.table.b6[0].Ways)
		c.table.each(func(stateKey, bpf.ProbeFlowStats) { used++ })
		if total > 0 {
			h.FlowTableFill = float64(used) / float64(total)
		}
	}
	if c.slots > 0 {
		behind := nowNs/c.bucketNs - (c.nextBucket - c.late)
		h.RingUse = min(max(float64(behind)/float64(c.slots), 0), 1)
	}
	return h
}
