package counters

import (
	"slices"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// ReadLatency summarises how long counter reads took (AfterNs - BeforeNs).
// On ENA every read waits for the device to answer admin commands, so this
// is the measured cost of sampling, and the uncertainty of each sample's
// instant.
type ReadLatency struct {
	Reads  int
	Min    time.Duration
	Median time.Duration // mean of the two middle reads for an even count
	Max    time.Duration
}

// Latency measures every sample, failed reads included: a failed admin
// command is often the slowest read of all. Filter samples first to measure
// one interface or only successful reads.
func Latency(samples []record.CounterSample) ReadLatency {
	if len(samples) == 0 {
		return ReadLatency{}
	}
	d := make([]int64, len(samples))
	for i, s := range samples {
		d[i] = s.AfterNs - s.BeforeNs
	}
	slices.Sort(d)
	n := len(d)
	median := d[n/2]
	if n%2 == 0 {
		median = d[n/2-1] + (d[n/2]-d[n/2-1])/2
	}
	return ReadLatency{
		Reads:  n,
		Min:    time.Duration(d[0]),
		Median: time.Duration(median),
		Max:    time.Duration(d[n-1]),
	}
}

// ReadTime is the samples' read durations summed: on ENA, how long the reads
// held the kernel's RTNL lock in all.
func ReadTime(samples []record.CounterSample) time.Duration {
	var sum int64
	for _, s := range samples {
		sum += s.AfterNs - s.BeforeNs
	}
	return time.Duration(sum)
}
