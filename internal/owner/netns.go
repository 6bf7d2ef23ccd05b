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

	"github.com/enaprobe/enaprobe/internal/record"
)

// namespaces indexes the network namespaces other than ours by inode: who
// their processes are, their ids as ours sees them (what a veth's peer is
// named by), their addresses, and which namespace each of our veths leads
// to. observe scans /proc and our links again; what it learned is kept, so
// that a container that exits before the trace ends is still named.
type namespaces struct {
	self    uint64
	learned map[uint64]bool         // asked for their id and addresses
	owners  map[uint64]record.Owner // who the processes were, at the last scan that found any
	ids     map[int]uint64          // our id of a namespace -> its inode
	addrs   map[netip.Addr]uint64   // address -> inode of the namespace holding it
	veths   map[int]int             // our veth's ifindex -> its peer's namespace id
}

func (n *namespaces) observe() {
	if n.owners == nil {
		n.learned = make(map[uint64]bool)
		n.owners = make(map[uint64]record.Owner)
		n.ids = make(map[int]uint64)
		n.addrs = make(map[netip.Addr]uint64)
		n.veths = make(map[int]int)
	}
	n.self = nsInode("/proc/self/ns/net")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	procs := make(map[uint64][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ino := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
		if ino == 0 || ino == n.self {
			continue
		}
		if !n.learned[ino] {
			n.learn(pid, ino)
		}
		procs[ino] = append(procs[ino], pid)
	}
	for ino, pids := range procs {
		if o, ok := ownerOf(pids); ok {
			n.owners[ino] = o
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		return
	}
	for _, l := range links {
		if l.Type() == "veth" && l.Attrs().NetNsID >= 0 {
			n.veths[l.Attrs().Index] = l.Attrs().NetNsID
		}
	}
}

// learn asks a namespace for its id as ours sees it and for its
// addresses; a namespace with no address yet (a CNI configures it after
// its first process starts) is asked again at the next scan.
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
		n.learned[ino] = true
	}
}

func nsInode(path string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// byVeth is who is in the namespace behind a veth of ours: its peer's.
func (n *namespaces) byVeth(ifindex uint32) (record.Owner, bool) {
	id, ok := n.veths[int(ifindex)]
	if !ok {
		return record.Owner{}, false // not a veth, or its peer is in our namespace
	}
	ino, ok := n.ids[id]
	if !ok {
		return record.Owner{}, false
	}
	o, ok := n.owners[ino]
	return o, ok
}

// byAddress is who is in the namespace holding addr.
func (n *namespaces) byAddress(addr netip.Addr) (record.Owner, bool) {
	ino, ok := n.addrs[addr.Unmap()]
	if !ok {
		return record.Owner{}, false
	}
	o, ok := n.owners[ino]
	return o, ok
}

// ownerOf is who a namespace's processes are: their common cgroup (a
// container's, a pod's), and the process when there is one.
func ownerOf(pids []int) (record.Owner, bool) {
	var cgroups []string
	for _, pid := range pids {
		if p, err := procCgroup(pid); err == nil {
			cgroups = append(cgroups, p)
		}
	}
	if len(cgroups) == 0 {
		return record.Owner{}, false // all gone since the scan
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
