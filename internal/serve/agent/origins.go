//go:build linux

package agent

import (
	"unsafe"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
)

// originKey names a flow on an interface.
type originKey struct {
	iface string
	key   record.FlowKey
}

type keptOrigin struct {
	origin loader.FlowOrigin
	lastNs int64 // the flow's last snapshot, or when its origin came
}

// origins keeps the origin of every flow the flight recorder may still
// hold, for the owners of a bundle's flows: a flow's origin comes once,
// its snapshots for as long as it moves. An origin goes when the ring no
// longer holds anything as recent as its flow's last snapshot; at most max
// are kept, and origins that came over it are dropped and counted. Not
// safe for concurrent use: the agent holds its lock.
type origins struct {
	m       map[originKey]keptOrigin
	max     int
	dropped uint64 // origins not kept, over max
}

// originBound is how many origins are kept beside a ring of ringBytes: a
// quarter of its memory bound (about 78,000 flows within the history at
// the default 64 MiB). Every flow the ring holds has a snapshot in it,
// about 2/3 of an origin's size, so the ring full of nothing but flows of
// one snapshot holds more; a host that busy gets the dropped counted.
func originBound(ringBytes int64) int {
	return max(int(ringBytes/4/originBytes), 1)
}

// originBytes is what one kept origin costs, about (a map entry's key
// and value; the map's own overhead is not counted).
const originBytes = int64(unsafe.Sizeof(originKey{}) + unsafe.Sizeof(keptOrigin{}))

func newOrigins(max int) *origins {
	return &origins{m: map[originKey]keptOrigin{}, max: max}
}

// add keeps the origins of one drain, and moves on the flows it saw.
func (o *origins) add(nowNs int64, iface string, in []loader.FlowOrigin, flows []record.FlowSnapshot) {
	for _, fo := range in {
		k := originKey{fo.Interface, fo.Key}
		if _, ok := o.m[k]; !ok && len(o.m) >= o.max {
			o.dropped++
			continue
		}
		o.m[k] = keptOrigin{origin: fo, lastNs: nowNs}
	}
	for _, f := range flows {
		k := originKey{iface, f.Key}
		if e, ok := o.m[k]; ok {
			e.lastNs = max(e.lastNs, f.TimeNs)
			o.m[k] = e
		}
	}
}

// expire forgets the origins of flows whose last snapshot is older than
// what the ring holds (oldestNs; 0 when it holds nothing).
func (o *origins) expire(oldestNs int64) {
	for k, e := range o.m {
		if e.lastNs < oldestNs {
			delete(o.m, k)
		}
	}
}

// of returns the origins of the flows of rec.
func (o *origins) of(rec *record.Recording) []loader.FlowOrigin {
	seen := map[originKey]bool{}
	var out []loader.FlowOrigin
	for _, f := range rec.Flows {
		k := originKey{f.Interface, f.Key}
		if seen[k] {
			continue
		}
		seen[k] = true
		if e, ok := o.m[k]; ok {
			out = append(out, e.origin)
		}
	}
	return out
}
