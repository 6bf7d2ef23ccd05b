//go:build linux

package owner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/cgroup2"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
)

// How an owner was found (record.Owner.How).
const (
	HowSocket  = "socket"
	HowVeth    = "veth"
	HowAddress = "address"
)

// Resolver turns the origins the datapath noted into owners.
type Resolver struct {
	// Tracker holds the sockets the cgroup programs saw; nil when they did
	// not run (TrackerErr says why).
	Tracker    *Tracker
	TrackerErr error
	Pods       PodDirs

	paths *cgroupPaths
	ns    namespaces
	nat   natTable
	pods  map[string]string
}

// NewResolver resolves with the sockets of t (nil when the tracker could
// not start: why is err).
func NewResolver(t *Tracker, err error) *Resolver {
	r := &Resolver{Tracker: t, TrackerErr: err, Pods: DefaultPodDirs, pods: make(map[string]string)}
	if t != nil {
		r.paths = t.paths
	} else if mount, err := cgroup2.Mount(); err == nil {
		r.paths = newCgroupPaths(mount)
	}
	return r
}

// Resolve names the owner of every origin it can, and says once for each
// reason why the others have none. The evictions, counted since the
// programs started, are noted always at the end of a trace (final), and
// in a part of a longer run (a serve bundle) only when a flow of its own
// lacks its process.
func (r *Resolver) Resolve(origins []loader.FlowOrigin, final bool) ([]record.FlowOwner, []string) {
	var out []record.FlowOwner
	var unseen, lost, forwardedLost int
	walked := false
	for _, fo := range origins {
		if fo.Kind == bpf.ProbeOriginORIGIN_FORWARDED {
			r.Observe() // the last look, once
			break
		}
	}
	for _, fo := range origins {
		var o record.Owner
		var ok bool
		switch fo.Kind {
		case bpf.ProbeOriginORIGIN_SOCKET:
			var kernel bool
			o, ok, kernel = r.bySocket(fo, &walked)
			switch {
			case kernel:
			case !ok:
				lost++
			case o.PID == 0:
				unseen++
			}
		case bpf.ProbeOriginORIGIN_FORWARDED:
			o, ok = r.byForwarding(fo)
			if !ok {
				forwardedLost++
			}
		}
		if ok {
			out = append(out, record.FlowOwner{Interface: fo.Interface, Key: fo.Key, Owner: o})
		}
	}
	// In a stable order: the flows came from maps.
	slices.SortFunc(out, func(a, b record.FlowOwner) int {
		return cmp.Or(strings.Compare(a.Interface, b.Interface), cmp.Compare(a.Key.Proto, b.Key.Proto),
			a.Key.Src.Compare(b.Key.Src), a.Key.Dst.Compare(b.Key.Dst))
	})
	var notes []string
	if r.Tracker == nil && r.TrackerErr != nil {
		notes = append(notes, fmt.Sprintf("owners: the cgroup programs did not run (%v): flows are named by their socket's cgroup, veth or address only, without process", r.TrackerErr))
	}
	if r.Tracker != nil && (final || unseen+lost > 0) {
		if c, err := r.Tracker.Counts(); err == nil && c.Evicted > 0 {
			notes = append(notes, fmt.Sprintf("owners: %d of %d sockets were evicted from the owner map (%d entries) before they were read: their flows are named by cgroup only (raise --owner-sockets)", c.Evicted, c.Inserted, r.Tracker.Capacity()))
		}
	}
	if unseen > 0 && r.Tracker != nil {
		notes = append(notes, fmt.Sprintf("owners: %d flows' sockets were opened before the trace (or accepted by a server) and not used since in a way the cgroup programs see: named by their cgroup, without process", unseen))
	}
	if lost > 0 {
		notes = append(notes, fmt.Sprintf("owners: %d flows' sockets could not be named (closed before they were seen, or their cgroup gone)", lost))
	}
	if forwardedLost > 0 {
		notes = append(notes, fmt.Sprintf("owners: %d forwarded flows came in on an interface that names no namespace (not a veth, or its namespace had no process while traced), and no namespace has their source address either", forwardedLost))
	}
	return out, notes
}

// bySocket names a local socket's flow: the process the cgroup programs
// recorded, else the socket's own cgroup. kernel says the socket is none
// the programs saw and is in the root cgroup: the kernel's own (ICMP
// errors, resets, neighbour discovery send from per-namespace control
// sockets), or a process in the root cgroup, which names nothing.
func (r *Resolver) bySocket(fo loader.FlowOrigin, walked *bool) (o record.Owner, ok, kernel bool) {
	cgroup := fo.Cgroup
	seen := false
	if r.Tracker != nil {
		if s, ok := r.Tracker.Socket(fo.Cookie); ok {
			o.PID, o.Comm = s.PID, s.Comm
			cgroup, seen = s.CgroupID, true
		}
	}
	path, known := r.cgroupPath(cgroup, walked)
	if known && path != "/" {
		pid, comm := o.PID, o.Comm
		o = r.describe(path)
		o.PID, o.Comm = pid, comm
	}
	if o == (record.Owner{}) {
		return o, false, !seen && known && path == "/"
	}
	o.How = HowSocket
	return o, true, false
}

func (r *Resolver) cgroupPath(id uint64, walked *bool) (string, bool) {
	if r.paths == nil || id == 0 {
		return "", false
	}
	return r.paths.path(id, walked)
}

// byForwarding names a forwarded flow by the namespace behind the veth it
// came in on, else by the namespace holding its source address (before
// NAT, when conntrack has it).
func (r *Resolver) byForwarding(fo loader.FlowOrigin) (record.Owner, bool) {
	if o, ok := r.ns.byVeth(fo.InIfindex); ok {
		o.How = HowVeth
		return r.withPod(o), true
	}
	src := fo.Key.Src.Addr()
	if pre, ok := r.nat.source(fo.Key); ok {
		src = pre
	}
	if o, ok := r.ns.byAddress(src); ok {
		o.How = HowAddress
		return r.withPod(o), true
	}
	return record.Owner{}, false
}

// Observe notes who is in every other network namespace now, and where
// our veths lead, for forwarded flows: a trace calls it every second, so
// that a container that exits before the trace ends is still named. It
// must run in the traced interfaces' network namespace.
func (r *Resolver) Observe() { r.ns.observe() }

// describe reads a cgroup path, the pod named when the kubelet tells.
func (r *Resolver) describe(path string) record.Owner {
	return r.withPod(Describe(path))
}

func (r *Resolver) withPod(o record.Owner) record.Owner {
	if o.Pod == "" {
		return o
	}
	name, ok := r.pods[o.Pod]
	if !ok {
		name = r.Pods.PodName(o.Pod)
		r.pods[o.Pod] = name
	}
	if name != "" {
		o.Pod = name
	}
	return o
}
