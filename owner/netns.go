//go:build linux

package owner

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/record"
)

// namespaces indexes the processes of every network namespace other than
// ours by the namespace's inode, scanned once from /proc when first needed.
type namespaces struct {
	scanned bool
	self    uint64
	procs   map[uint64][]int      // netns inode -> thread-group leaders in it
	ids     map[int]uint64        // our netns id of a namespace -> its inode
	addrs   map[netip.Addr]uint64 // address -> inode of the namespace holding it
}

func (n *namespaces) scan() {
	if n.scanned {
		return
	}
	n.scanned = true
	n.procs = make(map[uint64][]int)
	n.ids = make(map[int]uint64)
	n.addrs = make(map[netip.Addr]uint64)
	n.self = nsInode("/proc/self/ns/net")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ino := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
		if ino == 0 || ino == n.self {
			continue
		}
		if _, seen := n.procs[ino]; !seen {
			n.learn(pid, ino)
		}
		n.procs[ino] = append(n.procs[ino], pid)
	}
}

// learn asks a namespace, once, for its id as ours sees it (what a veth's
// peer names) and for its addresses.
func (n *namespaces) learn(pid int, ino uint64) {
	h, err := netns.GetFromPid(pid)
	if err != nil {
		return
	}
	defer h.Close()
	if id, err := netlink.GetNetNsIdByFd(int(h)); err == nil && id >= 0 {
		n.ids[id] = ino
	}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return
	}
	defer nh.Close()
	addrs, err := nh.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		n.addrs[ip.Unmap()] = ino
	}
}

func nsInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// byVeth is the namespace behind a veth of ours: its peer's.
func (n *namespaces) byVeth(ifindex uint32) (uint64, bool) {
	l, err := netlink.LinkByIndex(int(ifindex))
	if err != nil || l.Type() != "veth" {
		return 0, false
	}
	id := l.Attrs().NetNsID
	if id < 0 {
		return 0, false // the peer is in our namespace
	}
	n.scan()
	ino, ok := n.ids[id]
	return ino, ok
}

// byAddress is the namespace holding addr.
func (n *namespaces) byAddress(addr netip.Addr) (uint64, bool) {
	n.scan()
	ino, ok := n.addrs[addr.Unmap()]
	return ino, ok
}

// owner is who a namespace's processes are: their common cgroup (a
// container's, a pod's), and the process when there is one.
func (n *namespaces) owner(ino uint64) (record.Owner, bool) {
	pids := n.procs[ino]
	if len(pids) == 0 {
		return record.Owner{}, false
	}
	var cgroups []string
	for _, pid := range pids {
		if p, err := procCgroup(pid); err == nil {
			cgroups = append(cgroups, p)
		}
	}
	o := record.Owner{}
	if cg := commonPath(cgroups); cg != "" && cg != "/" {
		o = Describe(cg)
	}
	if len(pids) == 1 {
		o.PID = uint32(pids[0])
		o.Comm = procComm(pids[0])
	}
	return o, true
}

// commonPath is the longest path every one of paths is in.
func commonPath(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	common := strings.Split(paths[0], "/")
	for _, p := range paths[1:] {
		e := strings.Split(p, "/")
		i := 0
		for i < len(common) && i < len(e) && common[i] == e[i] {
			i++
		}
		common = slices.Clip(common[:i])
	}
	if len(common) <= 1 {
		return "/"
	}
	return strings.Join(common, "/")
}

func procComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// natTable maps a flow as it leaves after source NAT to its source
// before, from conntrack: an entry's reply direction is the flow reversed.
type natTable struct {
	loaded bool
	orig   map[record.FlowKey]netip.Addr
}

func (t *natTable) load() {
	if t.loaded {
		return
	}
	t.loaded = true
	t.orig = make(map[record.FlowKey]netip.Addr)
	for _, family := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, family)
		if err != nil {
			continue
		}
		for _, f := range flows {
			r := f.Reverse
			rs, ok1 := netip.AddrFromSlice(r.SrcIP)
			rd, ok2 := netip.AddrFromSlice(r.DstIP)
			src, ok3 := netip.AddrFromSlice(f.Forward.SrcIP)
			if !ok1 || !ok2 || !ok3 {
				continue
			}
			// The flow as it leaves: from the reply's destination to its source.
			k := record.FlowKey{Proto: r.Protocol, Src: netip.AddrPortFrom(rd.Unmap(), r.DstPort),
				Dst: netip.AddrPortFrom(rs.Unmap(), r.SrcPort)}
			t.orig[k] = src.Unmap()
		}
	}
}

// source is the source address flow k had before NAT, if conntrack knows.
func (t *natTable) source(k record.FlowKey) (netip.Addr, bool) {
	t.load()
	k.Src = netip.AddrPortFrom(k.Src.Addr().Unmap(), k.Src.Port())
	k.Dst = netip.AddrPortFrom(k.Dst.Addr().Unmap(), k.Dst.Port())
	a, ok := t.orig[k]
	return a, ok
}
