package ena

import (
	"errors"
	"fmt"
	"sort"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// ReplaySource plays back the counter samples a recording holds for one
// interface, on the recording's own timeline: a Read at time t after the
// first Read returns the last sample taken at most t after the recording's
// first sample, whatever the sample interval now. A recorded failed read
// replays as a failed read. After the last sample, the last values stay.
type ReplaySource struct {
	samples []record.CounterSample
	now     func() int64
	startNs int64 // monotonic time of the first Read; 0 before it
}

// NewReplaySource replays the samples of iface in rec. now is the clock,
// monoclock.Now when nil.
func NewReplaySource(rec *record.Recording, iface string, now func() int64) (*ReplaySource, error) {
	var samples []record.CounterSample
	for _, s := range rec.Counters {
		if s.Interface == iface {
			samples = append(samples, s)
		}
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("replay counters: the recording has no counter samples of %s", iface)
	}
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].BeforeNs < samples[j].BeforeNs })
	if now == nil {
		now = monoclock.Now
	}
	return &ReplaySource{samples: samples, now: now}, nil
}

// RecordedInterfaces lists the interfaces a recording has counter samples
// of, in the order they first appear.
func RecordedInterfaces(rec *record.Recording) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range rec.Counters {
		if !seen[s.Interface] {
			seen[s.Interface] = true
			out = append(out, s.Interface)
		}
	}
	return out
}

// Kind is "replay".
func (r *ReplaySource) Kind() string { return "replay" }

// Read returns the sample due at this point of the replay.
func (r *ReplaySource) Read() (map[string]uint64, error) {
	t := r.now()
	if r.startNs == 0 {
		r.startNs = t
	}
	due := r.samples[0].BeforeNs + (t - r.startNs)
	i := sort.Search(len(r.samples), func(i int) bool { return r.samples[i].BeforeNs > due }) - 1
	s := r.samples[max(i, 0)]
	if s.Err != "" {
		return nil, errors.New("replayed failed read: " + s.Err)
	}
	out := make(map[string]uint64, len(s.Values))
	for k, v := range s.Values {
		out[k] = v
	}
	return out, nil
}
