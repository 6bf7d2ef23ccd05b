package analyzer

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/record"
)

// ownerIndex finds the owner of a flow of the recording. An owner found for
// one direction of a connection is its owner in the other too: the reply
// packets of a socket's flow carry the reversed key.
type ownerIndex struct {
	byRef map[flowRef]*record.Owner
	// bySource holds, per interface, protocol, source address and
	// destination, the owner of every such flow when they all have the same
	// one (nil when they differ): the owner of a row that sums flows whose
	// source port varies (connection floods).
	bySource map[sourceRef]*record.Owner
}

type sourceRef struct {
	iface string
	proto uint8
	src   netip.Addr
	dst   netip.AddrPort
}

func buildOwnerIndex(owners []record.FlowOwner) ownerIndex {
	ix := ownerIndex{byRef: make(map[flowRef]*record.Owner), bySource: make(map[sourceRef]*record.Owner)}
	for i := range owners {
		fo := &owners[i]
		ix.byRef[flowRef{fo.Interface, fo.Key}] = &fo.Owner
	}
	for i := range owners {
		fo := &owners[i]
		rev := flowRef{fo.Interface, record.FlowKey{Proto: fo.Key.Proto, Src: fo.Key.Dst, Dst: fo.Key.Src}}
		if _, ok := ix.byRef[rev]; !ok {
			ix.byRef[rev] = &fo.Owner
		}
	}
	seen := make(map[sourceRef]bool)
	for ref, o := range ix.byRef {
		k := sourceRef{ref.iface, ref.key.Proto, ref.key.Src.Addr(), ref.key.Dst}
		if !seen[k] {
			seen[k] = true
			ix.bySource[k] = o
		} else if prev := ix.bySource[k]; prev != nil && *prev != *o {
			ix.bySource[k] = nil
		}
	}
	return ix
}

func (ix ownerIndex) of(ref flowRef) *record.Owner { return ix.byRef[ref] }

// ofRow is the owner of a finding's flow row: one 5-tuple, or every flow
// from one source address to one destination ("10.0.0.7:*").
func (ix ownerIndex) ofRow(iface string, fs FlowShare) *record.Owner {
	dst, err := netip.ParseAddrPort(fs.Dst)
	if err != nil {
		return nil
	}
	proto := record.ProtoNumber(fs.Proto)
	if addr, ok := strings.CutSuffix(fs.Src, ":*"); ok {
		a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
		if err != nil {
			return nil
		}
		return ix.bySource[sourceRef{iface, proto, a, dst}]
	}
	src, err := netip.ParseAddrPort(fs.Src)
	if err != nil {
		return nil
	}
	return ix.of(flowRef{iface, record.FlowKey{Proto: proto, Src: src, Dst: dst}})
}

// ownerGroup is what ranks owners: processes of one pod are one offender,
// then of one container, one cgroup, one process.
func ownerGroup(o *record.Owner) string {
	switch {
	case o.Pod != "":
		return "pod " + o.Pod
	case o.Container != "":
		return "container " + o.Container
	case o.Cgroup != "":
		return "cgroup " + o.Cgroup
	case o.Unit != "":
		return "unit " + o.Unit
	}
	return "process " + strconv.FormatUint(uint64(o.PID), 10)
}

// common keeps the fields two owners of one group share.
func common(a, b record.Owner) record.Owner {
	pick := func(x, y string) string {
		if x == y {
			return x
		}
		return ""
	}
	out := record.Owner{Comm: pick(a.Comm, b.Comm), Cgroup: pick(a.Cgroup, b.Cgroup), Unit: pick(a.Unit, b.Unit),
		Container: pick(a.Container, b.Container), Pod: pick(a.Pod, b.Pod), How: pick(a.How, b.How)}
	if a.PID == b.PID {
		out.PID = a.PID
	}
	return out
}

// ownersFromTallies ranks the owners of tallied flows by rankBy, each with
// its share of every tallied flow's (owned or not).
func (a *analysis) ownersFromTallies(tallies []flowTally, rankBy string) []OwnerShare {
	var total float64
	byGroup := make(map[string]*OwnerShare)
	var order []string
	for _, t := range tallies {
		v := rankValue(t, rankBy)
		total += v
		o := a.owners.of(t.ref)
		if o == nil || v == 0 {
			continue
		}
		g := ownerGroup(o)
		s := byGroup[g]
		if s == nil {
			s = &OwnerShare{Owner: *o}
			byGroup[g] = s
			order = append(order, g)
		} else {
			s.Owner = common(s.Owner, *o)
		}
		s.Flows++
		s.Bytes += t.bytes
		s.Packets += t.packets
		s.SYNs += t.syns
		s.Share += v
	}
	out := make([]OwnerShare, 0, len(order))
	for _, g := range order {
		s := byGroup[g]
		s.Share = share(s.Share, total)
		out = append(out, *s)
	}
	slices.SortStableFunc(out, func(x, y OwnerShare) int { return cmp.Compare(y.Share, x.Share) })
	return out[:min(len(out), a.opt.TopFlows)]
}

// aggregateKinds are the findings about an interface's traffic as a whole,
// whose owners are ranked over every flow of the finding's span; the
// others are about the flows they list.
var aggregateKinds = map[string]bool{
	KindMicroburstIn: true, KindMicroburstOut: true, KindPPSExceeded: true,
	KindConntrackExceeded: true, KindConntrackNearLimit: true,
	KindLinkLocalExceeded: true, KindLinkLocalHot: true, KindBaselineExhausted: true,
}

// attachOwners names the owner of every flow row of the findings and ranks
// each finding's owners.
func (a *analysis) attachOwners(findings []Finding) {
	if len(a.rec.Owners) == 0 {
		return
	}
	for i := range findings {
		f := &findings[i]
		for j := range f.Flows {
			f.Flows[j].Owner = a.owners.ofRow(f.Interface, f.Flows[j])
		}
		if !aggregateKinds[f.Kind] {
			f.Owners = a.ownersOfRows(f)
			continue
		}
		var dirs []record.Direction
		for _, d := range bothDirections {
			if f.Direction == "" || f.Direction == d.String() {
				dirs = append(dirs, d)
			}
		}
		keep := func(fi *flowInfo) bool {
			in := false
			for _, d := range dirs {
				in = in || hasDirection(fi.last, d)
			}
			if f.Kind == KindLinkLocalExceeded || f.Kind == KindLinkLocalHot {
				in = in && countrules.ServiceOf(fi.key.Dst.Addr(), a.rec.Meta.VPCResolver) != record.ServiceNone
			}
			return in
		}
		fromNs, toNs := a.monoOf(f.StartOffsetS), a.monoOf(f.EndOffsetS)
		if f.flowsToNs > f.flowsFromNs {
			fromNs, toNs = f.flowsFromNs, f.flowsToNs
		}
		rankBy := f.FlowsRankedBy
		if f.Kind == KindConntrackExceeded || f.Kind == KindConntrackNearLimit {
			rankBy = rankSYNs
		}
		tallies := a.flows.spreadTallies(f.Interface, fromNs, toNs, keep)
		if rankBy == rankAboveUsual {
			tallies = a.withUsual(tallies, f.Interface, fromNs, toNs)
		}
		f.Owners = a.ownersFromTallies(tallies, rankBy)
	}
	for i := range findings {
		if f := &findings[i]; len(f.Owners) > 0 {
			f.Summary += fmt.Sprintf("; sent by %s (%.0f%%)", f.Owners[0].Owner, 100*f.Owners[0].Share)
		}
	}
}

// ownersOfRows ranks the owners of a finding's own flow rows.
func (a *analysis) ownersOfRows(f *Finding) []OwnerShare {
	var tallies []flowTally
	for _, fs := range f.Flows {
		src, err1 := netip.ParseAddrPort(fs.Src)
		dst, err2 := netip.ParseAddrPort(fs.Dst)
		if err1 != nil || err2 != nil {
			continue
		}
		tallies = append(tallies, flowTally{ref: flowRef{f.Interface, record.FlowKey{Proto: record.ProtoNumber(fs.Proto), Src: src, Dst: dst}},
			bytes: fs.Bytes, packets: fs.Packets, syns: fs.SYNs})
	}
	return a.ownersFromTallies(tallies, cmp.Or(f.FlowsRankedBy, rankBytes))
}

// monoOf is the monotonic time of an offset from the trace start.
func (a *analysis) monoOf(offsetS float64) int64 {
	return a.rec.Meta.Start.MonoNs + int64(offsetS*1e9)
}
