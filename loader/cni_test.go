//go:build linux

package loader

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// Tests beside a CNI: small programs stand for the CNI's (drop everything,
// pass, hand on, redirect to another veth or straight into a peer
// namespace), attached before and after enaprobe, in tcx and legacy tc
// mode. enaprobe must count what crossed the wire and never change what
// the other program does to the packets.

// Verdicts of the stand-in programs.
const (
	cniNext         = "next"          // TCX_NEXT / TC_ACT_UNSPEC: the next program runs
	cniSlowNext     = "slow_next"     // next, after about 100 µs (a CNI busy with each packet)
	cniPass         = "pass"          // TCX_PASS / TC_ACT_OK: ends the chain, the packet goes on
	cniDrop         = "drop"          // TCX_DROP / TC_ACT_SHOT
	cniRedirect     = "redirect"      // bpf_redirect to the branch's veth (its egress)
	cniRedirectPeer = "redirect_peer" // bpf_redirect_peer into the branch's namespace
	cniRedirectIn   = "redirect_in"   // bpf_redirect with BPF_F_INGRESS: into the target's ingress
)

// cniProgram builds a stand-in returning verdict; ifindex is the redirect
// target.
func cniProgram(t *testing.T, verdict string, ifindex int) *ebpf.Program {
	t.Helper()
	var insns asm.Instructions
	switch verdict {
	case cniNext:
		insns = asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}
	case cniSlowNext:
		// 2,000 clock reads, a loop every verifier of the matrix bounds.
		insns = asm.Instructions{
			asm.Mov.Imm(asm.R6, 0),
			asm.FnKtimeGetNs.Call().WithSymbol("spin"),
			asm.Add.Imm(asm.R6, 1),
			asm.JLT.Imm(asm.R6, 2000, "spin"),
			asm.Mov.Imm(asm.R0, -1),
			asm.Return(),
		}
	case cniPass:
		insns = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	case cniDrop:
		insns = asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}
	case cniRedirect, cniRedirectPeer, cniRedirectIn:
		fn, flags := asm.FnRedirect, int32(0)
		switch verdict {
		case cniRedirectPeer:
			fn = asm.FnRedirectPeer
		case cniRedirectIn:
			flags = 1 // BPF_F_INGRESS
		}
		insns = asm.Instructions{asm.Mov.Imm(asm.R1, int32(ifindex)), asm.Mov.Imm(asm.R2, flags), fn.Call(), asm.Return()}
	default:
		t.Fatalf("no stand-in for %s", verdict)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "cni_standin", Type: ebpf.SchedCLS, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("load stand-in %s: %v", verdict, err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// attachCNI hooks prog to ifname in ns the way a CNI does: tcx at the head,
// or a direct-action filter at priority 1, handle 1, on a clsact qdisc it
// adds when there is none. It returns a function that removes it.
func attachCNI(t *testing.T, ns, ifname string, dir record.Direction, mode AttachMode, prog *ebpf.Program) func() {
	t.Helper()
	var detach func()
	err := vethpair.Do(ns, func() error {
		lnk, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		idx := lnk.Attrs().Index
		if mode == AttachTCX {
			typ := ebpf.AttachTCXIngress
			if dir == record.Egress {
				typ = ebpf.AttachTCXEgress
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: typ, Anchor: link.Head()})
			if err != nil {
				return err
			}
			detach = func() { l.Close() }
			t.Cleanup(detach) // and keep the link from the garbage collector
			return nil
		}
		if out, err := exec.Command("tc", "qdisc", "show", "dev", ifname).CombinedOutput(); err != nil || !strings.Contains(string(out), "clsact") {
			if out, err := exec.Command("tc", "qdisc", "add", "dev", ifname, "clsact").CombinedOutput(); err != nil {
				return fmt.Errorf("add clsact: %w: %s", err, out)
			}
		}
		parent := uint32(netlink.HANDLE_MIN_INGRESS)
		if dir == record.Egress {
			parent = netlink.HANDLE_MIN_EGRESS
		}
		f := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: parent, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
			Fd:          prog.FD(), Name: "cni_standin", DirectAction: true,
		}
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("add stand-in filter: %w", err)
		}
		detach = func() { _ = vethpair.Do(ns, func() error { return netlink.FilterDel(f) }) }
		t.Cleanup(detach)
		return nil
	})
	if errors.Is(err, ebpf.ErrNotSupported) && mode == AttachTCX {
		privtest.KernelLacks(t, "tcx", 6, 6)
	}
	if err != nil {
		t.Fatalf("attach stand-in on %s %s (%s): %v", ifname, dir, mode, err)
	}
	return detach
}

// hookListing is what tc and bpftool show on ifname in ns.
func hookListing(t *testing.T, ns, ifname string) string {
	t.Helper()
	var all []string
	for _, args := range [][]string{
		{"tc", "filter", "show", "dev", ifname, "ingress"},
		{"tc", "filter", "show", "dev", ifname, "egress"},
		{"tc", "qdisc", "show", "dev", ifname},
	} {
		out, _ := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
		all = append(all, string(out))
	}
	// This bpftool predates tcx: ask the kernel.
	idx := ifindexIn(t, ns, ifname)
	err := vethpair.Do(ns, func() error {
		for _, typ := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: typ})
			if errors.Is(err, unix.EINVAL) || errors.Is(err, ebpf.ErrNotSupported) {
				return nil // a kernel without tcx (before 6.6) has no tcx program to list
			}
			if err != nil {
				return err
			}
			for _, p := range res.Programs {
				all = append(all, fmt.Sprintf("%s: %s", typ, programName(p.ID)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("query tcx programs of %s: %v", ifname, err)
	}
	return strings.Join(all, "\n")
}

// stopBeside detaches enaprobe, checks nothing of it is left (unless
// another enaprobe runs) while the stand-in still is, and returns what was
// counted.
func (tr *trace) stopBeside(t *testing.T, standin string, anotherEnaprobe bool) Result {
	t.Helper()
	if err := vethpair.Do(tr.pair.NSA, tr.att.Close); err != nil {
		t.Fatal(err)
	}
	tr.att = nil
	listing := hookListing(t, tr.pair.NSA, tr.pair.IfA)
	if !anotherEnaprobe && strings.Contains(listing, "enaprobe") {
		t.Errorf("enaprobe left something after close:\n%s", listing)
	}
	if standin != "" && !strings.Contains(listing, standin) {
		t.Errorf("the stand-in %s is gone after enaprobe closed:\n%s", standin, listing)
	}
	return tr.finish(t)
}

// check runs the trace loop's placement check inside A's namespace.
func (tr *trace) check(t *testing.T) {
	t.Helper()
	if err := vethpair.Do(tr.pair.NSA, tr.att.Check); err != nil {
		t.Fatalf("check placement: %v", err)
	}
}

func ifindexIn(t *testing.T, ns, ifname string) int {
	t.Helper()
	var idx int
	if err := vethpair.Do(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err == nil {
			idx = l.Attrs().Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestBesideCNIVerdicts: for every verdict, a stand-in before and after
// enaprobe on A's interface. Ingress: B sends to A; egress: A sends to B.
// enaprobe counts every packet of the direction (it runs first), and the
// stand-in's verdict stands: the receiver it meant gets every packet, the
// others none.
func TestBesideCNIVerdicts(t *testing.T) {
	type tcase struct {
		mode    AttachMode
		dir     record.Direction
		verdict string
		after   bool
	}
	var cases []tcase
	for _, mode := range []AttachMode{AttachTCX, AttachTC} {
		for _, dir := range []record.Direction{record.Ingress, record.Egress} {
			verdicts := []string{cniNext, cniPass, cniDrop, cniRedirect}
			if dir == record.Ingress {
				verdicts = append(verdicts, cniRedirectPeer) // an ingress-only helper
			}
			for _, v := range verdicts {
				for _, after := range []bool{false, true} {
					cases = append(cases, tcase{mode, dir, v, after})
				}
			}
		}
	}
	for i, c := range cases {
		order := "before"
		if c.after {
			order = "after"
		}
		t.Run(fmt.Sprintf("%s/%s/%s/%s", c.mode, c.dir, c.verdict, order), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(100 + i)})
			// The redirect target C looks like the receiver: same MAC and
			// address, so it takes the packets meant for A (ingress) or
			// B (egress).
			from, to, toNS, toMAC, toAddr := pair.NSB, pair.AddrA, pair.NSA, pair.MACA, pair.AddrA
			if c.dir == record.Egress {
				from, to, toNS, toMAC, toAddr = pair.NSA, pair.AddrB, pair.NSB, pair.MACB, pair.AddrB
			}
			br, err := pair.AddBranch(toMAC, toAddr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { br.Close() })
			dst := netip.AddrPortFrom(to, 9300)
			sink := newUDPSink(t, toNS, dst)
			branchSink := newUDPSink(t, br.NS, dst)
			prog := cniProgram(t, c.verdict, ifindexIn(t, pair.NSA, br.IfA))

			var tr *trace
			if !c.after {
				attachCNI(t, pair.NSA, pair.IfA, c.dir, c.mode, prog)
				tr = startTrace(t, pair, c.mode, DefaultOptions())
				tr.check(t)
				if n := tr.att.Notes(); len(n) != 0 {
					t.Errorf("notes with the stand-in attached first: %q", n)
				}
			} else {
				tr = startTrace(t, pair, c.mode, DefaultOptions())
				attachCNI(t, pair.NSA, pair.IfA, c.dir, c.mode, prog)
				tr.check(t) // what the trace loop does periodically
				notes := strings.Join(tr.att.Notes(), "\n")
				if !strings.Contains(notes, "moved back to the head") || !strings.Contains(notes, "cni_standin") {
					t.Errorf("notes after the stand-in was put ahead: %q", notes)
				}
				tr.check(t)
				if n := tr.att.Notes(); len(n) != 1 {
					t.Errorf("a second check, with enaprobe first, changed the notes: %q", n)
				}
			}
			const n, payload = 300, 64
			sendUDP(t, from, dst, n, payload)
			want, wantBranch := n, 0
			switch c.verdict {
			case cniDrop:
				want = 0
			case cniRedirect, cniRedirectPeer:
				want, wantBranch = 0, n
			}
			got, gotBranch := sink.received(want), branchSink.received(wantBranch)
			res := tr.stopBeside(t, "cni_standin", false)

			if got != want || gotBranch != wantBranch {
				t.Errorf("receiver got %d, redirect target %d; the stand-in's verdict means %d and %d", got, gotBranch, want, wantBranch)
			}
			tot := res.Totals[c.dir]
			frame := uint64(14 + 20 + 8 + payload)
			if tot.Packets[record.ClassUDP] != n || tot.Bytes[record.ClassUDP] != n*frame || tot.SumPackets() != n {
				t.Errorf("enaprobe %s counted %d udp packets (%d bytes), %d in all; want %d (%d bytes): every packet that crossed",
					c.dir, tot.Packets[record.ClassUDP], tot.Bytes[record.ClassUDP], tot.SumPackets(), n, n*frame)
			}
		})
	}
}

// TestReanchorUnderTraffic puts stand-ins ahead of enaprobe again and again
// while packets flow, and moves enaprobe back to the head each time: not a
// packet lost, none counted twice. The truth is A's receive counter: the
// packets the veth handed to the stack, every one of which meets tc
// ingress (a burst may overflow the backlog before that).
func TestReanchorUnderTraffic(t *testing.T) {
	for i, mode := range []AttachMode{AttachTCX, AttachTC} {
		t.Run(string(mode), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(150 + i)})
			dst := netip.AddrPortFrom(pair.AddrA, 9400)
			sink := newUDPSink(t, pair.NSA, dst)
			tr := startTrace(t, pair, mode, DefaultOptions())
			rx0 := rxPackets(t, pair.NSA, pair.IfA)
			// Traffic runs until enough moves happened under it (an attach
			// can take longer than a fixed burst lasts on a loaded machine),
			// bounded in packets and time.
			const minPackets, maxPackets, chunk, payload, wantMoves = 20000, 400000, 1000, 32, 4
			var stop atomic.Bool
			var sentTotal atomic.Int64
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for !stop.Load() && sentTotal.Load() < maxPackets {
					sendUDP(t, pair.NSB, dst, chunk, payload)
					sentTotal.Add(chunk)
				}
			}()
			deadline := time.Now().Add(30 * time.Second)
			moves := 0
			var detachPrev func()
			for k := 0; ; k++ {
				if moves >= wantMoves && sentTotal.Load() >= minPackets || time.Now().After(deadline) {
					stop.Store(true)
				}
				select {
				case <-sent:
				default:
					// A CNI agent restarting: its new program goes to the
					// head, then its old one goes (tcx holds 64 at most).
					prog := cniProgram(t, cniSlowNext, 0)
					var detach func()
					if mode == AttachTCX {
						detach = attachCNI(t, pair.NSA, pair.IfA, record.Ingress, mode, prog)
					} else {
						detach = attachCNIFilter(t, pair.NSA, pair.IfA, prog, uint32(k+1))
					}
					if detachPrev != nil {
						detachPrev()
					}
					detachPrev = detach
					tr.check(t)
					moves++
					continue
				}
				break
			}
			n := uint64(sentTotal.Load())
			sink.received(int(n))
			rx := rxPackets(t, pair.NSA, pair.IfA) - rx0
			notes := tr.att.Notes()
			res := tr.stopBeside(t, "cni_standin", false)
			if moves < 2 || len(notes) == 0 {
				t.Fatalf("%d stand-ins attached during the traffic, notes %q: the test moved nothing", moves, notes)
			}
			if rx < n/2 {
				t.Fatalf("A received %d of %d packets", rx, n)
			}
			t.Logf("%d moves to the head during %d packets (%d reached A)", moves, n, rx)
			if got := res.Totals[record.Ingress].SumPackets(); got != rx {
				t.Errorf("ingress counted %d packets across %d moves, want the %d A received", got, moves, rx)
			}
		})
	}
}

// rxPackets is ifname's receive counter.
func rxPackets(t *testing.T, ns, ifname string) uint64 {
	t.Helper()
	var n uint64
	if err := vethpair.Do(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err == nil {
			n = l.Attrs().Statistics.RxPackets
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// attachCNIFilter adds prog as a filter at priority 1 with the given handle
// on the clsact qdisc of ifname (which must exist), and returns a function
// that removes it.
func attachCNIFilter(t *testing.T, ns, ifname string, prog *ebpf.Program, handle uint32) func() {
	t.Helper()
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindexIn(t, ns, ifname), Parent: netlink.HANDLE_MIN_INGRESS, Handle: handle, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd:          prog.FD(), Name: "cni_standin", DirectAction: true,
	}
	if err := vethpair.Do(ns, func() error { return netlink.FilterAdd(f) }); err != nil {
		t.Fatalf("add stand-in filter handle %d: %v", handle, err)
	}
	del := func() { _ = vethpair.Do(ns, func() error { return netlink.FilterDel(f) }) }
	t.Cleanup(del)
	return del
}

// TestTwoEnaprobe runs two traces on one interface, in every pair of
// modes: each counts every packet, neither moves because of the other, and
// once both closed nothing of either is left.
func TestTwoEnaprobe(t *testing.T) {
	for i, modes := range [][2]AttachMode{{AttachTCX, AttachTCX}, {AttachTC, AttachTC}, {AttachTCX, AttachTC}, {AttachTC, AttachTCX}} {
		t.Run(string(modes[0])+"+"+string(modes[1]), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(160 + i)})
			in, out := netip.AddrPortFrom(pair.AddrA, 9500), netip.AddrPortFrom(pair.AddrB, 9500)
			sinkA, sinkB := newUDPSink(t, pair.NSA, in), newUDPSink(t, pair.NSB, out)
			first := startTrace(t, pair, modes[0], DefaultOptions())
			second := startTrace(t, pair, modes[1], DefaultOptions())
			first.check(t)
			second.check(t)
			const n, payload = 400, 80
			sendUDP(t, pair.NSB, in, n, payload)
			sendUDP(t, pair.NSA, out, n, payload)
			if a, b := sinkA.received(n), sinkB.received(n); a != n || b != n {
				t.Fatalf("sinks got %d and %d, want %d", a, b, n)
			}
			for k, tr := range []*trace{first, second} {
				if notes := tr.att.Notes(); len(notes) != 0 {
					t.Errorf("trace %d notes beside another enaprobe: %q", k, notes)
				}
			}
			for k, tr := range []*trace{first, second} {
				res := tr.stopBeside(t, "", k == 0)
				for _, d := range []record.Direction{record.Ingress, record.Egress} {
					if got := res.Totals[d].SumPackets(); got != n {
						t.Errorf("trace %d (%s) counted %d %s packets, want %d", k, modes[k], got, d, n)
					}
				}
				if k == 0 && !strings.Contains(hookListing(t, pair.NSA, pair.IfA), "enaprobe") {
					t.Errorf("closing the first trace removed the second's programs")
				}
			}
			if left, err := pair.Leftovers(); err != nil || left != "" {
				t.Errorf("after both closed: %v\n%s", err, left)
			}
		})
	}
}

// TestRedirectedIntoEgress: a program on another interface redirects
// packets to A's interface; they leave through it and enaprobe's egress
// counts them.
func TestRedirectedIntoEgress(t *testing.T) {
	for i, mode := range []AttachMode{AttachTCX, AttachTC} {
		t.Run(string(mode), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(170 + i)})
			from := netip.AddrFrom4([4]byte{10, 201, byte(170 + i), 3})
			br, err := pair.AddBranch(fmt.Sprintf("02:00:0a:c9:%02x:03", 170+i), from, map[netip.Addr]string{pair.AddrB: pair.MACB})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { br.Close() })
			dst := netip.AddrPortFrom(pair.AddrB, 9600)
			sink := newUDPSink(t, pair.NSB, dst)
			tr := startTrace(t, pair, mode, DefaultOptions())
			attachCNI(t, pair.NSA, br.IfA, record.Ingress, mode, cniProgram(t, cniRedirect, ifindexIn(t, pair.NSA, pair.IfA)))
			const n, payload = 200, 50
			sendUDP(t, br.NS, dst, n, payload)
			if got := sink.received(n); got != n {
				t.Fatalf("B got %d of the %d packets redirected through A's interface", got, n)
			}
			res := tr.stopBeside(t, "", false)
			if got := res.Totals[record.Egress].Packets[record.ClassUDP]; got != n {
				t.Errorf("egress counted %d udp packets, want the %d redirected into the interface", got, n)
			}
		})
	}
}

// TestRedirectedIntoIngress: a program on another interface redirects
// packets into A's interface's ingress. tc ingress runs for them as for
// packets from the wire, so enaprobe counts them as ingress although they
// never crossed A's wire: a limit docs/deploy.md states.
func TestRedirectedIntoIngress(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 172})
	br, err := pair.AddBranch("02:00:0a:c9:ac:03", netip.MustParseAddr("10.201.172.3"), map[netip.Addr]string{pair.AddrA: pair.MACA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	dst := netip.AddrPortFrom(pair.AddrA, 9650)
	sink := newUDPSink(t, pair.NSA, dst)
	tr := startTrace(t, pair, AttachTCX, DefaultOptions())
	attachCNI(t, pair.NSA, br.IfA, record.Ingress, AttachTCX, cniProgram(t, cniRedirectIn, ifindexIn(t, pair.NSA, pair.IfA)))
	const n = 150
	sendUDP(t, br.NS, dst, n, 40)
	if got := sink.received(n); got != n {
		t.Fatalf("A got %d of the %d packets redirected into its ingress", got, n)
	}
	res := tr.stopBeside(t, "", false)
	if got := res.Totals[record.Ingress].Packets[record.ClassUDP]; got != n {
		t.Errorf("ingress counted %d udp packets, want the %d redirected into it", got, n)
	}
}

// TestForeignFilterAtOurPlace: another tool's filters at priority 1 with
// handle 1 (where CNIs sit) and at the first handle enaprobe would take, on
// a clsact qdisc it added. enaprobe attaches beside them, first, leaves
// them untouched, and leaves the qdisc when it closes.
func TestForeignFilterAtOurPlace(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 175})
	dst := netip.AddrPortFrom(pair.AddrA, 9700)
	sink := newUDPSink(t, pair.NSA, dst)
	drop := cniProgram(t, cniDrop, 0)
	attachCNI(t, pair.NSA, pair.IfA, record.Ingress, AttachTC, cniProgram(t, cniNext, 0)) // handle 1
	attachCNIFilter(t, pair.NSA, pair.IfA, drop, tcHandleBase)
	before := hookListing(t, pair.NSA, pair.IfA)
	tr := startTrace(t, pair, AttachTC, DefaultOptions())
	tr.check(t)
	if n := tr.att.Notes(); len(n) != 0 {
		t.Errorf("notes: %q", n)
	}
	const n = 100
	sendUDP(t, pair.NSB, dst, n, 20)
	if got := sink.received(0); got != 0 {
		t.Errorf("A got %d packets through the other tool's drop filter", got)
	}
	res := tr.stopBeside(t, "cni_standin", false)
	if got := res.Totals[record.Ingress].Packets[record.ClassUDP]; got != n {
		t.Errorf("ingress counted %d, want %d", got, n)
	}
	if after := hookListing(t, pair.NSA, pair.IfA); after != before {
		t.Errorf("the other tool's filters changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestNotFirstNoted: where enaprobe cannot run first it says so: a tcx
// program runs before every legacy filter, and tc allows one protocol per
// priority, so a filter for IPv4 only at priority 1 keeps enaprobe (all
// protocols) at priority 2.
func TestNotFirstNoted(t *testing.T) {
	for i, c := range []struct {
		name   string
		attach func(t *testing.T, pair *vethpair.Pair, prog *ebpf.Program)
		want   string
	}{
		{"tcx ahead of tc", func(t *testing.T, pair *vethpair.Pair, prog *ebpf.Program) {
			attachCNI(t, pair.NSA, pair.IfA, record.Ingress, AttachTCX, prog)
		}, "tcx program cni_standin"},
		{"ipv4 filter at priority 1", func(t *testing.T, pair *vethpair.Pair, prog *ebpf.Program) {
			inNSA := func(args ...string) {
				if out, err := exec.Command("ip", append([]string{"netns", "exec", pair.NSA}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %v %s", args, err, out)
				}
			}
			inNSA("tc", "qdisc", "add", "dev", pair.IfA, "clsact")
			f := &netlink.BpfFilter{
				FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindexIn(t, pair.NSA, pair.IfA), Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_IP, Priority: 1},
				Fd:          prog.FD(), Name: "cni_standin", DirectAction: true,
			}
			if err := vethpair.Do(pair.NSA, func() error { return netlink.FilterAdd(f) }); err != nil {
				t.Fatal(err)
			}
		}, "tc filter cni_standin (priority 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(176 + i)})
			dst := netip.AddrPortFrom(pair.AddrA, 9800)
			sink := newUDPSink(t, pair.NSA, dst)
			c.attach(t, pair, cniProgram(t, cniDrop, 0))
			tr := startTrace(t, pair, AttachTC, DefaultOptions())
			tr.check(t)
			tr.check(t)
			notes := tr.att.Notes()
			if len(notes) != 1 || !strings.Contains(notes[0], c.want) || !strings.Contains(notes[0], "runs before enaprobe") {
				t.Errorf("notes %q, want one naming %q", notes, c.want)
			}
			sendUDP(t, pair.NSB, dst, 50, 20)
			if got := sink.received(0); got != 0 {
				t.Errorf("A got %d through the drop program", got)
			}
			res := tr.stopBeside(t, "cni_standin", false)
			if got := res.Totals[record.Ingress].Packets[record.ClassUDP]; got != 0 {
				t.Errorf("ingress counted %d behind a program that drops all: the test does not test placement", got)
			}
		})
	}
}

// TestClsBpfNewestFirst documents the kernel rule enaprobe's legacy
// placement rests on: filters at one priority run newest first (cls_bpf
// adds to the head of its list), whatever their handles; a dump lists them
// in that order.
func TestClsBpfNewestFirst(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 178})
	if out, err := exec.Command("ip", "netns", "exec", pair.NSA, "tc", "qdisc", "add", "dev", pair.IfA, "clsact").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, h := range []uint32{5, 1, 9} {
		attachCNIFilter(t, pair.NSA, pair.IfA, cniProgram(t, cniNext, 0), h)
	}
	var handles []uint32
	err := vethpair.Do(pair.NSA, func() error {
		l, err := netlink.LinkByName(pair.IfA)
		if err != nil {
			return err
		}
		fs, err := listFilters(l)
		for _, f := range fs {
			handles = append(handles, f.attrs.Handle)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(handles) != "[9 1 5]" {
		t.Errorf("filters at one priority listed as %v, want newest first [9 1 5]", handles)
	}
}

// TestXDPNoted: an XDP program runs before tc; what it drops never reaches
// enaprobe, and the notes say so.
func TestXDPNoted(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 179})
	xdp, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "cni_xdp", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}}) // XDP_PASS
	if err != nil {
		t.Fatal(err)
	}
	defer xdp.Close()
	var l link.Link
	if err := vethpair.Do(pair.NSA, func() (err error) {
		l, err = link.AttachXDP(link.XDPOptions{Program: xdp, Interface: ifindexIn(t, pair.NSA, pair.IfA)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tr := startTrace(t, pair, AttachAuto, DefaultOptions())
	tr.check(t)
	if notes := tr.att.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "XDP program") {
		t.Errorf("notes %q, want one about the XDP program", notes)
	}
}

// TestPassAheadHidesAll shows why enaprobe must run first: a program that
// passes every packet with TCX_PASS / TC_ACT_OK, put ahead of it, ends the
// chain, and enaprobe counts nothing, until its check moves it back to the
// head.
func TestPassAheadHidesAll(t *testing.T) {
	for i, mode := range []AttachMode{AttachTCX, AttachTC} {
		t.Run(string(mode), func(t *testing.T) {
			pair := vethpair.ForTest(t, vethpair.Options{Octet: byte(180 + i)})
			dst := netip.AddrPortFrom(pair.AddrB, 9900)
			sink := newUDPSink(t, pair.NSB, dst)
			tr := startTrace(t, pair, mode, DefaultOptions())
			attachCNI(t, pair.NSA, pair.IfA, record.Egress, mode, cniProgram(t, cniPass, 0))
			const n = 100
			sendUDP(t, pair.NSA, dst, n, 20)
			counted := func() uint64 {
				// This test drains itself: the trace's own drains stop.
				if err := tr.stopDraining(); err != nil {
					t.Fatal(err)
				}
				if err := tr.col.Drain(monoclock.Now(), false); err != nil {
					t.Fatal(err)
				}
				return tr.col.Totals()[record.Egress].Packets[record.ClassUDP]
			}
			if got := counted(); got != 0 {
				t.Fatalf("egress counted %d behind a program that ends the chain, want 0", got)
			}
			tr.check(t)
			sendUDP(t, pair.NSA, dst, n, 20)
			if got := sink.received(2 * n); got != 2*n {
				t.Errorf("B got %d, want %d: the pass program passes all", got, 2*n)
			}
			res := tr.stopBeside(t, "cni_standin", false)
			if got := res.Totals[record.Egress].Packets[record.ClassUDP]; got != n {
				t.Errorf("egress counted %d, want the %d sent after the move to the head", got, n)
			}
		})
	}
}
