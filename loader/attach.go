//go:build linux

package loader

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AttachMode chooses how the programs hook into tc.
type AttachMode string

const (
	AttachAuto AttachMode = "auto" // tcx where the kernel has it (6.6+), else tc
	AttachTCX  AttachMode = "tcx"
	AttachTC   AttachMode = "tc" // clsact qdisc with direct-action cls_bpf filters
)

// ParseAttachMode accepts auto, tcx and tc.
func ParseAttachMode(s string) (AttachMode, error) {
	switch m := AttachMode(s); m {
	case AttachAuto, AttachTCX, AttachTC:
		return m, nil
	}
	return "", fmt.Errorf("attach mode %q: want auto, tcx or tc", s)
}

// Legacy filters carry this name prefix and the owner's PID, so a filter
// left by a killed run can be told from one of a run still going.
const filterPrefix = "enaprobe"

// Legacy filter priorities: ingress first, so we see every packet that
// arrived; egress last, so we see what really leaves after other filters.
const (
	ingressPrio = 1
	egressPrio  = 0xfff0
)

// Attachment is the datapath hooked into one interface. Close undoes
// exactly what Attach did and nothing else.
type Attachment struct {
	Interface string
	Index     int
	Mode      AttachMode // the mode in use: tcx or tc

	links        []link.Link
	filters      []*netlink.BpfFilter
	createdQdisc *netlink.GenericQdisc
}

// Attach hooks p's programs to ingress and egress of ifname.
func Attach(p *Probe, ifname string, mode AttachMode) (*Attachment, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w (list them with `ip link`)", ifname, err)
	}
	a := &Attachment{Interface: ifname, Index: iface.Index}
	switch mode {
	case AttachTCX:
		err = a.attachTCX(p)
	case AttachTC:
		err = a.attachTC(p)
	case AttachAuto, "":
		err = a.attachTCX(p)
		if errors.Is(err, ebpf.ErrNotSupported) {
			err = a.attachTC(p)
		}
	default:
		err = fmt.Errorf("attach mode %q: want auto, tcx or tc", mode)
	}
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return a, nil
}

func (a *Attachment) attachTCX(p *Probe) error {
	a.Mode = AttachTCX
	for _, h := range []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
		anchor link.Anchor
		name   string
	}{
		{p.objs.Ingress, ebpf.AttachTCXIngress, link.Head(), "ingress"},
		{p.objs.Egress, ebpf.AttachTCXEgress, link.Tail(), "egress"},
	} {
		l, err := link.AttachTCX(link.TCXOptions{Interface: a.Index, Program: h.prog, Attach: h.attach, Anchor: h.anchor})
		if err != nil {
			return fmt.Errorf("attach tcx %s on %s: %w", h.name, a.Interface, err)
		}
		a.links = append(a.links, l)
	}
	return nil
}

func (a *Attachment) attachTC(p *Probe) error {
	a.Mode = AttachTC
	lnk, err := netlink.LinkByIndex(a.Index)
	if err != nil {
		return fmt.Errorf("look up %s: %w", a.Interface, err)
	}
	if err := RemoveStaleFilters(a.Interface); err != nil {
		return err
	}
	if err := a.ensureClsact(lnk); err != nil {
		return err
	}
	for _, h := range []struct {
		prog   *ebpf.Program
		parent uint32
		prio   uint16
		name   string
	}{
		{p.objs.Ingress, netlink.HANDLE_MIN_INGRESS, ingressPrio, "ingress"},
		{p.objs.Egress, netlink.HANDLE_MIN_EGRESS, egressPrio, "egress"},
	} {
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{
				LinkIndex: a.Index,
				Parent:    h.parent,
				Handle:    1,
				Protocol:  unix.ETH_P_ALL,
				Priority:  h.prio,
			},
			Fd:           h.prog.FD(),
			Name:         filterName(os.Getpid(), h.name),
			DirectAction: true,
		}
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("attach tc %s filter on %s: %w", h.name, a.Interface, err)
		}
		a.filters = append(a.filters, f)
	}
	return nil
}

func (a *Attachment) ensureClsact(lnk netlink.Link) error {
	qdiscs, err := netlink.QdiscList(lnk)
	if err != nil {
		return fmt.Errorf("list qdiscs of %s: %w", a.Interface, err)
	}
	for _, q := range qdiscs {
		if q.Type() == "clsact" {
			return nil // someone else's: use it, never remove it
		}
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(q); err != nil {
		return fmt.Errorf("add clsact qdisc to %s: %w", a.Interface, err)
	}
	a.createdQdisc = q
	return nil
}

// Close detaches. It removes the clsact qdisc only if Attach created it and
// no filter of anyone else has been added to it since.
func (a *Attachment) Close() error {
	var errs []error
	for _, l := range a.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach tcx from %s: %w", a.Interface, err))
		}
	}
	a.links = nil
	for _, f := range a.filters {
		if err := netlink.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove tc filter %s from %s: %w", f.Name, a.Interface, err))
		}
	}
	a.filters = nil
	if a.createdQdisc != nil {
		if n, err := a.foreignFilters(); err != nil {
			errs = append(errs, err)
		} else if n == 0 {
			if err := netlink.QdiscDel(a.createdQdisc); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("remove clsact qdisc from %s: %w", a.Interface, err))
			}
		}
		a.createdQdisc = nil
	}
	return errors.Join(errs...)
}

// foreignFilters counts filters on the clsact hooks that are not ours.
func (a *Attachment) foreignFilters() (int, error) {
	lnk, err := netlink.LinkByIndex(a.Index)
	if err != nil {
		return 0, nil // the interface is gone, and its qdisc with it
	}
	n := 0
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := netlink.FilterList(lnk, parent)
		if err != nil {
			return 0, fmt.Errorf("list tc filters of %s: %w", a.Interface, err)
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); !ok || !strings.HasPrefix(bf.Name, filterPrefix) {
				n++
			}
		}
	}
	return n, nil
}

func filterName(pid int, hook string) string {
	return fmt.Sprintf("%s-%d-%s", filterPrefix, pid, hook)
}

// filterOwner returns the PID in one of our filter names.
func filterOwner(name string) (int, bool) {
	parts := strings.Split(name, "-")
	if len(parts) != 3 || parts[0] != filterPrefix {
		return 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	return pid, err == nil
}

// RemoveStaleFilters removes legacy tc filters of ours whose process is
// gone (a run that was killed with SIGKILL). Filters of live runs, and
// everything that is not ours, stay.
func RemoveStaleFilters(ifname string) error {
	lnk, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("look up %s: %w", ifname, err)
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := netlink.FilterList(lnk, parent)
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				continue // no clsact qdisc
			}
			return fmt.Errorf("list tc filters of %s: %w", ifname, err)
		}
		for _, f := range fs {
			bf, ok := f.(*netlink.BpfFilter)
			if !ok {
				continue
			}
			pid, ours := filterOwner(bf.Name)
			if !ours || processAlive(pid) {
				continue
			}
			if err := netlink.FilterDel(bf); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("remove stale filter %s from %s: %w", bf.Name, ifname, err)
			}
		}
	}
	return nil
}

func processAlive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
