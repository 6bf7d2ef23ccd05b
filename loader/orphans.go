//go:build linux

package loader

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Legacy filters carry their owner in their name, so that a filter a killed
// run left can be told from one of a run still going, and enaprobe's clsact
// qdisc from anyone else's:
//
//	enaprobe-PID-HOOK-nsINODE-tSTART[-qdisc]
//
// PID in the PID namespace INODE (a filter of another namespace is never
// judged dead), started at START (clock ticks after boot, so that another
// process that got the PID later is not taken for the owner), HOOK ingress
// or egress, and -qdisc when enaprobe added the clsact qdisc the filter
// sits on.
const filterPrefix = "enaprobe"

type filterOwner struct {
	pid   int
	hook  string
	pidNS uint64 // 0: not recorded (names of older versions)
	start uint64 // 0: not recorded
	qdisc bool
}

func (o filterOwner) String() string {
	s := fmt.Sprintf("%s-%d-%s-ns%d-t%d", filterPrefix, o.pid, o.hook, o.pidNS, o.start)
	if o.qdisc {
		s += "-qdisc"
	}
	return s
}

// newFilterOwner is this process as the owner of a filter on hook.
func newFilterOwner(hook string, qdisc bool) filterOwner {
	start, _ := processStart(os.Getpid())
	return filterOwner{pid: os.Getpid(), hook: hook, pidNS: ownPIDNS(), start: start, qdisc: qdisc}
}

func parseFilterName(name string) (filterOwner, bool) {
	parts := strings.Split(name, "-")
	if len(parts) < 3 || parts[0] != filterPrefix {
		return filterOwner{}, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return filterOwner{}, false
	}
	o := filterOwner{pid: pid, hook: parts[2]}
	for _, p := range parts[3:] {
		switch {
		case p == "qdisc":
			o.qdisc = true
		case strings.HasPrefix(p, "ns"):
			o.pidNS, _ = strconv.ParseUint(p[2:], 10, 64)
		case strings.HasPrefix(p, "t"):
			o.start, _ = strconv.ParseUint(p[1:], 10, 64)
		}
	}
	return o, true
}

// alive says whether the owner still runs; a process of another PID
// namespace is taken to be alive, as nothing here can tell.
func (o filterOwner) alive() bool {
	if o.pidNS != 0 && o.pidNS != ownPIDNS() {
		return true
	}
	if o.pid == os.Getpid() {
		return true
	}
	err := unix.Kill(o.pid, 0)
	if err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	if o.start == 0 {
		return true
	}
	start, err := processStart(o.pid)
	return err != nil || start == o.start // unreadable: take it for alive
}

// processStart is when pid started, in clock ticks after boot: field 22 of
// /proc/PID/stat, counted after the command name, which may hold spaces.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[i+1:]))
	if i < 0 || len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64) // field 3 is fields[0]
}

func ownPIDNS() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

// tcFilter is a legacy filter on one of the clsact hooks.
type tcFilter struct {
	attrs  netlink.FilterAttrs
	name   string // the BPF filter's name, or the filter kind
	isOurs bool   // enaprobe's (any run's)
	owner  filterOwner
	filter netlink.Filter
}

// listFilters lists the filters of both clsact hooks, ingress first, each in
// the order they run. No clsact qdisc: none.
func listFilters(lnk netlink.Link) ([]tcFilter, error) {
	var out []tcFilter
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := netlink.FilterList(lnk, parent)
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, fmt.Errorf("list tc filters of %s: %w", lnk.Attrs().Name, err)
		}
		for _, f := range fs {
			tf := tcFilter{attrs: *f.Attrs(), name: f.Type(), filter: f}
			if bf, ok := f.(*netlink.BpfFilter); ok {
				tf.name = bf.Name
				tf.owner, tf.isOurs = parseFilterName(bf.Name)
			}
			out = append(out, tf)
		}
	}
	return out, nil
}

func hookName(parent uint32) string {
	if parent == netlink.HANDLE_MIN_EGRESS {
		return "egress"
	}
	return "ingress"
}

// Cleanup is what RemoveOrphans found on one interface.
type Cleanup struct {
	Interface    string
	Filters      []FoundFilter // every enaprobe filter on the interface
	QdiscRemoved bool          // the clsact qdisc a killed run added
}

// FoundFilter is one legacy filter of enaprobe.
type FoundFilter struct {
	Hook    string
	Name    string
	PID     int
	Running bool // its process still runs: kept
	Removed bool
}

// Removed says what was removed, one line each, for a log.
func (c Cleanup) Removed() []string {
	var out []string
	for _, f := range c.Filters {
		if f.Removed {
			out = append(out, fmt.Sprintf("removed tc %s filter %s of enaprobe PID %d (no longer running) from %s", f.Hook, f.Name, f.PID, c.Interface))
		}
	}
	if c.QdiscRemoved {
		out = append(out, fmt.Sprintf("removed the clsact qdisc a killed enaprobe had added to %s", c.Interface))
	}
	return out
}

// RemoveOrphans removes the legacy filters of enaprobe runs that no longer
// exist (killed with SIGKILL) from ifname, and the clsact qdisc one of them
// added once no filter is left on it. Filters of running enaprobe, and
// anything that is not enaprobe's, stay. tcx links die with their process:
// they never outlive a run.
func RemoveOrphans(ifname string) (Cleanup, error) {
	c := Cleanup{Interface: ifname}
	lnk, err := netlink.LinkByName(ifname)
	if err != nil {
		return c, fmt.Errorf("look up %s: %w", ifname, err)
	}
	filters, err := listFilters(lnk)
	if err != nil {
		return c, err
	}
	addedQdisc := false
	for _, f := range filters {
		if !f.isOurs {
			continue
		}
		found := FoundFilter{Hook: hookName(f.attrs.Parent), Name: f.name, PID: f.owner.pid, Running: f.owner.alive()}
		if !found.Running {
			if err := netlink.FilterDel(f.filter); err != nil && !errors.Is(err, unix.ENOENT) {
				return c, fmt.Errorf("remove filter %s of a killed enaprobe from %s: %w", f.name, ifname, err)
			}
			found.Removed = true
			addedQdisc = addedQdisc || f.owner.qdisc
		}
		c.Filters = append(c.Filters, found)
	}
	if addedQdisc {
		if c.QdiscRemoved, err = removeQdiscIfEmpty(ifname); err != nil {
			return c, err
		}
	}
	return c, nil
}

// removeQdiscIfEmpty removes the clsact qdisc of ifname, which enaprobe
// added, when no filter of anyone is left on it.
func removeQdiscIfEmpty(ifname string) (bool, error) {
	lnk, err := netlink.LinkByName(ifname)
	if err != nil {
		return false, nil // the interface is gone, and its qdisc with it
	}
	filters, err := listFilters(lnk)
	if err != nil || len(filters) > 0 {
		return false, err
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: lnk.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscDel(q); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return false, nil
		}
		return false, fmt.Errorf("remove clsact qdisc from %s: %w", ifname, err)
	}
	return true, nil
}
