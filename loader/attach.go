//go:build linux

package loader

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
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

// Placement. Both programs run first on their hook, ahead of every program
// that is not enaprobe's:
//   - ingress: a packet that crossed the wire counted against the allowances
//     even if a CNI program then drops it or redirects it into a pod.
//   - egress: a program that returns TC_ACT_OK (TCX_PASS) ends the chain, and
//     CNIs do that for every packet they let through (Cilium's bpf_host), so
//     a program after them would see nothing. First, enaprobe counts every
//     packet handed to the device (including the ones redirected into it
//     from other devices), and also the few a later program drops or
//     redirects away.
//
// When another program is put ahead later, Check finds it and moves back to
// the head without losing or double-counting a packet (see trampoline).

// tcPrio is the legacy filters' priority: the first one tc allows.
const tcPrio = 1

// tcHandleBase is where our legacy filter handles start: far from the small
// handles (1, 2, ...) CNIs replace by number, so a CNI's `tc filter replace`
// never hits ours.
const tcHandleBase = 0x454e0001

// Attachment is the datapath hooked into one interface. Close undoes
// exactly what Attach did and nothing else.
type Attachment struct {
	Interface string
	Index     int
	Mode      AttachMode // the mode in use: tcx or tc
	// Orphans are the filters (and qdisc) of killed enaprobe runs Attach
	// found on the interface and removed.
	Orphans Cleanup

	hooks      []*hook
	ownsQdisc  bool // clsact added by enaprobe (this run or an earlier one)
	attachedAt time.Time
	notes      []string
}

// Attach hooks p's programs to ingress and egress of ifname. It first
// removes what killed enaprobe runs left there.
func Attach(p *Probe, ifname string, mode AttachMode) (*Attachment, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w (list them with `ip link`)", ifname, err)
	}
	a := &Attachment{Interface: ifname, Index: iface.Index, attachedAt: time.Now()}
	if a.Orphans, err = RemoveOrphans(ifname); err != nil {
		// Not a reason to trace nothing: say it, and go on.
		a.note("could not remove what killed enaprobe runs left: %v (try `enaprobe cleanup -i %s`)", err, ifname)
	}
	for _, d := range []struct {
		name   string
		target *ebpf.Program
		tcx    ebpf.AttachType
		parent uint32
	}{
		{"ingress", p.objs.EnaprobeIngress, ebpf.AttachTCXIngress, netlink.HANDLE_MIN_INGRESS},
		{"egress", p.objs.EnaprobeEgress, ebpf.AttachTCXEgress, netlink.HANDLE_MIN_EGRESS},
	} {
		h, err := newHook(a, d.name, d.target, d.tcx, d.parent)
		if err != nil {
			return nil, errors.Join(err, a.Close())
		}
		a.hooks = append(a.hooks, h)
	}
	switch mode {
	case AttachTCX:
		err = a.attachAll(AttachTCX)
	case AttachTC:
		err = a.attachAll(AttachTC)
	case AttachAuto, "":
		err = a.attachAll(AttachTCX)
		if errors.Is(err, ebpf.ErrNotSupported) {
			err = a.attachAll(AttachTC)
		}
	default:
		err = fmt.Errorf("attach mode %q: want auto, tcx or tc", mode)
	}
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return a, nil
}

func (a *Attachment) attachAll(mode AttachMode) error {
	a.Mode = mode
	if mode == AttachTC {
		if err := a.ensureClsact(); err != nil {
			return err
		}
	}
	if err := a.checkXDP(); err != nil {
		return err
	}
	for _, h := range a.hooks {
		if err := h.anchor(); err != nil {
			for _, h := range a.hooks {
				h.detachAll()
			}
			return err
		}
		if err := h.check(false); err != nil {
			return err
		}
	}
	return nil
}

// Check makes sure enaprobe still runs first on both hooks: when another
// program was put ahead of it (a CNI attaching at the head, a filter added
// at our priority) or ours was removed, it attaches again at the head and
// notes it. The trace loop calls it periodically.
func (a *Attachment) Check() error {
	if err := a.checkXDP(); err != nil {
		return err
	}
	for _, h := range a.hooks {
		if err := h.check(true); err != nil {
			return err
		}
	}
	return nil
}

// checkXDP notes an XDP program on the interface: it runs before tc, on
// every packet that arrives, and what it drops, sends back (XDP_TX) or
// redirects never reaches enaprobe's ingress; what it transmits bypasses
// tc egress.
func (a *Attachment) checkXDP() error {
	lnk, err := netlink.LinkByIndex(a.Index)
	if err != nil {
		return fmt.Errorf("look up %s: %w", a.Interface, err)
	}
	if x := lnk.Attrs().Xdp; x != nil && x.Attached {
		a.note("an XDP program (id %d) runs on the interface before tc: packets it drops, sends back or redirects are not counted", x.ProgId)
	}
	return nil
}

// Notes are what the report should say about the placement: when enaprobe
// could not be first, and when it had to move back to the head.
func (a *Attachment) Notes() []string { return slices.Clone(a.notes) }

func (a *Attachment) note(format string, args ...any) {
	n := fmt.Sprintf("%s: ", a.Interface) + fmt.Sprintf(format, args...)
	if !slices.Contains(a.notes, n) {
		a.notes = append(a.notes, n)
	}
}

func (a *Attachment) since() string {
	return time.Since(a.attachedAt).Round(10 * time.Millisecond).String()
}

// Close detaches. It removes the clsact qdisc only if enaprobe added it and
// no filter of anyone (another enaprobe included) is left on it.
func (a *Attachment) Close() error {
	var errs []error
	for _, h := range a.hooks {
		errs = append(errs, h.detachAll(), h.close())
	}
	a.hooks = nil
	if a.ownsQdisc {
		if _, err := removeQdiscIfEmpty(a.Interface); err != nil {
			errs = append(errs, err)
		}
		a.ownsQdisc = false
	}
	return errors.Join(errs...)
}

func (a *Attachment) ensureClsact() error {
	lnk, err := netlink.LinkByIndex(a.Index)
	if err != nil {
		return fmt.Errorf("look up %s: %w", a.Interface, err)
	}
	qdiscs, err := netlink.QdiscList(lnk)
	if err != nil {
		return fmt.Errorf("list qdiscs of %s: %w", a.Interface, err)
	}
	for _, q := range qdiscs {
		if q.Type() == "clsact" {
			// Someone's: use it, and never remove it, unless a filter of a
			// running enaprobe says enaprobe added it.
			filters, err := listFilters(lnk)
			if err != nil {
				return err
			}
			a.ownsQdisc = slices.ContainsFunc(filters, func(f tcFilter) bool { return f.owner.qdisc })
			return nil
		}
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: a.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscAdd(q); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil // added meanwhile, by someone else: theirs
		}
		return fmt.Errorf("add clsact qdisc to %s: %w", a.Interface, err)
	}
	a.ownsQdisc = true
	return nil
}

// hook is one direction: a trampoline program attached first on the hook,
// which tail-calls the probe's counting program.
//
// Why a trampoline: moving back to the head means attaching a second
// program at the head while the first still runs further down the chain,
// then detaching the first. Run the counting program from both and a packet
// between the two attachments is counted twice; detach first and packets go
// uncounted. Each trampoline has a generation; the gate map holds the one
// that counts. A trampoline whose generation is in the gate counts and
// leaves its generation in a per-CPU token; a newer one (attached ahead,
// not yet in the gate) leaves 0 and counts nothing; an older one (further
// down) counts unless the token holds the gate's generation, i.e. unless
// the gate's trampoline already counted this very packet. The chain runs a
// packet through its programs on one CPU without interruption, and every
// packet that reaches the older trampoline passed the newer one first once
// the attach has returned and an RCU grace period has passed; so switching
// the gate to the new generation moves the counting from the old to the new
// trampoline with every packet counted exactly once, as long as the old
// one stays attached until a second grace period has passed (a packet that
// read the old gate at the new trampoline is counted further down).
type hook struct {
	a      *Attachment
	dir    string
	target *ebpf.Program // the probe's counting program
	tcxTyp ebpf.AttachType
	parent uint32 // clsact hook of the legacy filters

	gate, token, progs *ebpf.Map
	gen                uint32     // the generation in the gate
	cur                *anchorage // the attached trampoline that counts
	notFirst           string     // why we are not first, as last noted
	moves              int        // times attached again at the head
}

// maxMoveNotes bounds the notes of moves back to the head, for a tool that
// keeps attaching ahead.
const maxMoveNotes = 3

func (h *hook) moved(format string, args ...any) {
	h.moves++
	switch {
	case h.moves <= maxMoveNotes:
		h.a.note(format, args...)
	case h.moves == maxMoveNotes+1:
		h.a.note("%s: other programs keep being put ahead of enaprobe or removing it; it moves back to the head each time (further moves not noted)", h.dir)
	}
}

// anchorage is one attached trampoline.
type anchorage struct {
	gen    uint32
	prog   *ebpf.Program
	progID ebpf.ProgramID
	link   link.Link
	filter *netlink.BpfFilter
}

func newHook(a *Attachment, dir string, target *ebpf.Program, tcxTyp ebpf.AttachType, parent uint32) (*hook, error) {
	h := &hook{a: a, dir: dir, target: target, tcxTyp: tcxTyp, parent: parent}
	var err error
	mk := func(name string, typ ebpf.MapType, valueSize uint32) *ebpf.Map {
		if err != nil {
			return nil
		}
		var m *ebpf.Map
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: name, Type: typ, KeySize: 4, ValueSize: valueSize, MaxEntries: 1})
		if err != nil {
			err = fmt.Errorf("create %s map for %s of %s: %w", name, dir, a.Interface, err)
		}
		return m
	}
	h.gate = mk("enaprobe_gate", ebpf.Array, 4)
	h.token = mk("enaprobe_token", ebpf.PerCPUArray, 4)
	h.progs = mk("enaprobe_progs", ebpf.ProgramArray, 4)
	if err == nil {
		err = h.progs.Put(uint32(0), target)
	}
	if err != nil {
		return nil, errors.Join(err, h.close())
	}
	return h, nil
}

func (h *hook) close() error {
	var errs []error
	for _, m := range []*ebpf.Map{h.gate, h.token, h.progs} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// TrampolineName is every trampoline's program name; other enaprobe runs
// recognise each other's programs by it (and by "enaprobe" in general).
const TrampolineName = "enaprobe_first"

// trampoline is the program of generation gen (see hook).
func (h *hook) trampoline(gen uint32) asm.Instructions {
	const key = -4
	lookup := func(m *ebpf.Map) asm.Instructions {
		return asm.Instructions{
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.R10),
			asm.Add.Imm(asm.R2, key),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "next"),
		}
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.R10, key, 0, asm.Word),
	}
	insns = append(insns, lookup(h.gate)...)
	insns = append(insns, asm.LoadMem(asm.R7, asm.R0, 0, asm.Word)) // r7 = gate
	insns = append(insns, lookup(h.token)...)                       // r0 = &token
	insns = append(insns,
		asm.JEq.Imm(asm.R7, int32(gen), "claim"),
		asm.JLT.Imm(asm.R7, int32(gen), "newer"),
		// Older: count unless the gate's trampoline, ahead, counted it.
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JEq.Reg(asm.R1, asm.R7, "next"),
		asm.Ja.Label("count"),
		asm.StoreImm(asm.R0, 0, 0, asm.Word).WithSymbol("newer"),
		asm.Ja.Label("next"),
		asm.StoreImm(asm.R0, 0, int64(gen), asm.Word).WithSymbol("claim"),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("count"),
		asm.LoadMapPtr(asm.R2, h.progs.FD()),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnTailCall.Call(),
		// The counting program's verdict is always "next"; so is ours
		// when the tail call cannot run.
		asm.Mov.Imm(asm.R0, -1).WithSymbol("next"), // TCX_NEXT, TC_ACT_UNSPEC
		asm.Return(),
	)
	return insns
}

// anchor attaches a trampoline of the next generation at the head of the
// hook and makes it the counting one, then detaches the previous one.
func (h *hook) anchor() error {
	gen := h.gen + 1
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: TrampolineName, Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: h.trampoline(gen),
	})
	if err != nil {
		return fmt.Errorf("load %s trampoline for %s: %w", h.dir, h.a.Interface, err)
	}
	next := &anchorage{gen: gen, prog: prog}
	if info, err := prog.Info(); err == nil {
		next.progID, _ = info.ID()
	}
	if h.cur == nil {
		// Nothing counts yet: the first trampoline counts from the start.
		if err := h.gate.Put(uint32(0), gen); err != nil {
			prog.Close()
			return fmt.Errorf("set %s gate of %s: %w", h.dir, h.a.Interface, err)
		}
	}
	if err := h.attach(next); err != nil {
		prog.Close()
		return err
	}
	if h.cur == nil {
		h.cur, h.gen = next, gen
		return nil
	}
	// Every packet that reaches the old trampoline must have passed the
	// new one: wait out packets already in the chain.
	if err := synchronizeRCU(); err != nil {
		h.a.note("%s: could not wait for packets in flight (%v): the move to the head may have counted a packet per CPU twice or not at all", h.dir, err)
	}
	if err := h.gate.Put(uint32(0), gen); err != nil {
		return errors.Join(fmt.Errorf("set %s gate of %s: %w", h.dir, h.a.Interface, err), h.detach(next))
	}
	old := h.cur
	h.cur, h.gen = next, gen
	// A packet that read the old gate at the new trampoline (which left
	// it to the old one) may still be on its way down the chain. A legacy
	// filter is unlinked under RCU (cls_bpf's list_del_rcu): a packet past
	// the new trampoline then skips the old one and goes uncounted (about
	// one packet in 2.5 moves behind a CNI stand-in holding each packet
	// 100 µs). Wait it out before detaching. (tcx swaps the whole program
	// array, which a packet in flight keeps running; the wait costs a grace
	// period per move there too, and moves are rare.)
	if err := synchronizeRCU(); err != nil {
		h.a.note("%s: could not wait for packets in flight (%v): the move to the head may have left a packet per CPU uncounted", h.dir, err)
	}
	return h.detach(old)
}

func (h *hook) attach(an *anchorage) error {
	if h.a.Mode == AttachTCX {
		l, err := link.AttachTCX(link.TCXOptions{Interface: h.a.Index, Program: an.prog, Attach: h.tcxTyp, Anchor: link.Head()})
		if err != nil {
			return fmt.Errorf("attach tcx %s on %s: %w", h.dir, h.a.Interface, err)
		}
		an.link = l
		return nil
	}
	lnk, err := netlink.LinkByIndex(h.a.Index)
	if err != nil {
		return fmt.Errorf("look up %s: %w", h.a.Interface, err)
	}
	filters, err := listFilters(lnk)
	if err != nil {
		return err
	}
	handle := uint32(tcHandleBase)
	for slices.ContainsFunc(filters, func(f tcFilter) bool { return f.attrs.Handle == handle }) {
		handle++
	}
	prio := uint16(tcPrio)
	for {
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{
				LinkIndex: h.a.Index, Parent: h.parent, Handle: handle, Protocol: unix.ETH_P_ALL, Priority: prio,
			},
			Fd:           an.prog.FD(),
			Name:         newFilterOwner(h.dir, h.a.ownsQdisc).String(),
			DirectAction: true,
		}
		err := netlink.FilterAdd(f)
		if err == nil {
			an.filter = f
			return nil
		}
		// A filter of another protocol holds this priority: tc puts one
		// protocol per priority. Take the next free one; check notes it.
		if errors.Is(err, unix.EINVAL) && prio < 0xffff && prioTaken(filters, h.parent, prio) {
			prio++
			continue
		}
		// The handle was taken since the listing (another enaprobe
		// starting at the same time).
		if errors.Is(err, unix.EEXIST) && handle < tcHandleBase+1024 {
			handle++
			continue
		}
		return fmt.Errorf("attach tc %s filter on %s: %w", h.dir, h.a.Interface, err)
	}
}

func prioTaken(filters []tcFilter, parent uint32, prio uint16) bool {
	return slices.ContainsFunc(filters, func(f tcFilter) bool { return f.attrs.Parent == parent && f.attrs.Priority == prio })
}

func (h *hook) detach(an *anchorage) error {
	var errs []error
	if an.link != nil {
		if err := an.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach tcx %s from %s: %w", h.dir, h.a.Interface, err))
		}
		an.link = nil
	}
	if an.filter != nil {
		if err := netlink.FilterDel(an.filter); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("remove tc %s filter %s from %s: %w", h.dir, an.filter.Name, h.a.Interface, err))
		}
		an.filter = nil
	}
	if an.prog != nil {
		errs = append(errs, an.prog.Close())
		an.prog = nil
	}
	return errors.Join(errs...)
}

func (h *hook) detachAll() error {
	if h.cur == nil {
		return nil
	}
	err := h.detach(h.cur)
	h.cur = nil
	return err
}

// chainEntry is one program or filter on a hook, in the order they run.
type chainEntry struct {
	name     string // program or filter name, for the notes
	ours     bool   // this attachment's counting trampoline
	enaprobe bool   // any enaprobe's
}

// check finds whether a program that is not enaprobe's runs ahead of ours,
// and moves ours back to the head if it can. reanchor false only notes.
func (h *hook) check(reanchor bool) error {
	chain, err := h.chain()
	if err != nil {
		return err
	}
	at := slices.IndexFunc(chain, func(e chainEntry) bool { return e.ours })
	if at < 0 {
		// Removed by someone else (bpftool link detach, tc filter del).
		h.moved("%s: enaprobe's program was removed by another tool after %s and attached again; packets in between were not counted", h.dir, h.a.since())
		old := h.cur
		h.cur = nil // the new one counts from the start
		if err := h.anchor(); err != nil {
			return err
		}
		return h.detach(old)
	}
	ahead := firstForeign(chain[:at])
	if ahead == "" {
		return nil
	}
	if reanchor && h.canMoveAhead(ahead) {
		if err := h.anchor(); err != nil {
			return err
		}
		if chain, err = h.chain(); err != nil {
			return err
		}
		at = slices.IndexFunc(chain, func(e chainEntry) bool { return e.ours })
		if now := firstForeign(chain[:max(at, 0)]); now == "" {
			h.moved("%s: %s was put ahead of enaprobe after %s; enaprobe moved back to the head (packets it dropped or redirected before the move were not counted)", h.dir, ahead, h.a.since())
			h.notFirst = ""
			return nil
		}
	}
	if h.notFirst != ahead {
		h.notFirst = ahead
		h.a.note("%s: %s runs before enaprobe (since %s): packets it drops or redirects are not counted", h.dir, ahead, h.a.since())
	}
	return nil
}

// canMoveAhead is false where no attach can get ahead of the program that
// is: a tcx program ahead of legacy filters, or a filter at a lower
// priority number or of another protocol at ours.
func (h *hook) canMoveAhead(ahead string) bool {
	if h.a.Mode == AttachTCX {
		return true
	}
	return h.cur.filter != nil && h.cur.filter.Priority == tcPrio && !isTCX(ahead)
}

func firstForeign(chain []chainEntry) string {
	for _, e := range chain {
		if !e.enaprobe {
			return e.name
		}
	}
	return ""
}

func isTCX(name string) bool { return len(name) > 4 && name[:4] == "tcx " }

// chain lists what runs on the hook, in order: tcx programs, then (in tc
// mode) the legacy filters.
func (h *hook) chain() ([]chainEntry, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: h.a.Index, Attach: h.tcxTyp})
	if err != nil {
		if h.a.Mode == AttachTCX {
			return nil, fmt.Errorf("query tcx %s programs of %s: %w", h.dir, h.a.Interface, err)
		}
		res = nil // a kernel without tcx (before 6.6): no tcx program can be ahead
	}
	var chain []chainEntry
	if res != nil {
		for _, p := range res.Programs {
			name := programName(p.ID)
			chain = append(chain, chainEntry{
				name:     fmt.Sprintf("tcx program %s (id %d)", name, p.ID),
				ours:     h.cur != nil && h.cur.link != nil && p.ID == h.cur.progID,
				enaprobe: hasEnaprobePrefix(name),
			})
		}
	}
	if h.a.Mode != AttachTC {
		return chain, nil
	}
	lnk, err := netlink.LinkByIndex(h.a.Index)
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", h.a.Interface, err)
	}
	filters, err := listFilters(lnk)
	if err != nil {
		return nil, err
	}
	for _, f := range filters {
		if f.attrs.Parent != h.parent {
			continue
		}
		chain = append(chain, chainEntry{
			name: fmt.Sprintf("tc filter %s (priority %d, handle %#x)", f.name, f.attrs.Priority, f.attrs.Handle),
			ours: h.cur != nil && h.cur.filter != nil && f.attrs.Handle == h.cur.filter.Handle &&
				f.attrs.Priority == h.cur.filter.Priority && f.name == h.cur.filter.Name,
			enaprobe: f.isOurs,
		})
	}
	return chain, nil
}

func programName(id ebpf.ProgramID) string {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return "?"
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return "?"
	}
	return info.Name
}

func hasEnaprobePrefix(name string) bool {
	return len(name) >= len(filterPrefix) && name[:len(filterPrefix)] == filterPrefix
}

// synchronizeRCU waits until every CPU has left the RCU read-side sections
// it was in, and with them the tc chains it was running:
// membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu().
func synchronizeRCU() error {
	const membarrierCmdGlobal = 1 // MEMBARRIER_CMD_GLOBAL, linux/membarrier.h
	_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0)
	if errno != 0 {
		return fmt.Errorf("membarrier: %w", errno)
	}
	return nil
}
