//go:build linux

// Package vethpair builds two network namespaces joined by a veth pair, for
// tests that push real traffic through the kernel. Names are random, so
// concurrent tests never collide, and Close removes everything.
//
// The pair is quiet on purpose: IPv6 is off and neighbours are static, so
// the only packets on the wire are the ones a test sends.
package vethpair

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// Pair is namespace A (the traced host) and namespace B (its peer).
type Pair struct {
	NSA, NSB     string // names under /run/netns
	IfA, IfB     string // veth ends, IfA in NSA and IfB in NSB
	AddrA, AddrB netip.Addr
	MACA, MACB   string
}

// Options shape the pair.
type Options struct {
	MTU int // 0 keeps the default 1500
	// Subnet third octet, so two pairs in one test get distinct addresses.
	Octet byte
}

// New creates the namespaces, the veth pair, addresses 10.201.<octet>.1/24
// (A) and .2 (B), and static neighbour entries.
func New(opts Options) (p *Pair, err error) {
	id := randomID()
	p = &Pair{
		NSA: "enpa" + id, NSB: "enpb" + id, IfA: "enpa" + id, IfB: "enpb" + id,
		AddrA: netip.AddrFrom4([4]byte{10, 201, opts.Octet, 1}),
		AddrB: netip.AddrFrom4([4]byte{10, 201, opts.Octet, 2}),
		MACA:  "02:00:0a:c9:" + fmt.Sprintf("%02x", opts.Octet) + ":01",
		MACB:  "02:00:0a:c9:" + fmt.Sprintf("%02x", opts.Octet) + ":02",
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
			p = nil
		}
	}()
	mtu := opts.MTU
	if mtu == 0 {
		mtu = 1500
	}
	steps := [][]string{
		{"netns", "add", p.NSA},
		{"netns", "add", p.NSB},
		{"link", "add", p.IfA, "netns", p.NSA, "address", p.MACA, "mtu", fmt.Sprint(mtu), "type", "veth",
			"peer", "name", p.IfB, "netns", p.NSB, "address", p.MACB, "mtu", fmt.Sprint(mtu)},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return p, err
		}
	}
	for _, side := range []struct {
		ns, ifname, peerMAC string
		addr, peer          netip.Addr
	}{
		{p.NSA, p.IfA, p.MACB, p.AddrA, p.AddrB},
		{p.NSB, p.IfB, p.MACA, p.AddrB, p.AddrA},
	} {
		for _, s := range [][]string{
			{"-n", side.ns, "link", "set", "lo", "up"},
			{"-n", side.ns, "addr", "add", side.addr.String() + "/24", "dev", side.ifname},
			{"-n", side.ns, "link", "set", side.ifname, "up"},
			{"-n", side.ns, "neigh", "replace", side.peer.String(), "lladdr", side.peerMAC, "dev", side.ifname, "nud", "permanent"},
		} {
			if err := ip(s...); err != nil {
				return p, err
			}
		}
		if err := sysctl(side.ns, "net.ipv6.conf.all.disable_ipv6", "1"); err != nil {
			return p, err
		}
	}
	return p, nil
}

// AddPeerAddress puts addr on B's veth end and makes A reach it over the
// link with a static neighbour entry, as if B were that host.
func (p *Pair) AddPeerAddress(addr netip.Addr) error {
	for _, s := range [][]string{
		{"-n", p.NSB, "addr", "add", addr.String() + "/32", "dev", p.IfB},
		{"-n", p.NSA, "route", "replace", addr.String() + "/32", "dev", p.IfA},
		{"-n", p.NSA, "neigh", "replace", addr.String(), "lladdr", p.MACB, "dev", p.IfA, "nud", "permanent"},
	} {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// B answers from addr to A over its own link.
	return nil
}

// Close removes both namespaces; the veth pair goes with them.
func (p *Pair) Close() error {
	var errs []error
	for _, ns := range []string{p.NSA, p.NSB} {
		if err := ip("netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Do runs fn on a locked OS thread inside namespace ns. Sockets fn creates
// stay in ns after Do returns, so they can be used from any goroutine.
func Do(ns string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return fmt.Errorf("enter netns %s: %w", ns, err)
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is in the wrong namespace: never unlock it, so the
		// runtime throws it away instead of reusing it.
		runtime.LockOSThread()
		return errors.Join(fnErr, fmt.Errorf("return from netns %s: %w", ns, err))
	}
	return fnErr
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func sysctl(ns, key, value string) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", key+"="+value).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %w: %s", key, value, ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Branch is a third namespace C joined to A by a second veth pair, for
// tests that redirect packets from A's interface to another one.
type Branch struct {
	NS       string // C
	IfA, IfC string // the second pair's ends, IfA in A's namespace
}

// AddBranch makes C and its link to A; C's end gets mac and addr/24 and
// static neighbour entries for neigh (address to MAC). Close removes it.
func (p *Pair) AddBranch(mac string, addr netip.Addr, neigh map[netip.Addr]string) (b *Branch, err error) {
	id := randomID()
	b = &Branch{NS: "enpc" + id, IfA: "enpx" + id, IfC: "enpc" + id}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
			b = nil
		}
	}()
	if err := ip("netns", "add", b.NS); err != nil {
		return b, err
	}
	// No IPv6 on the new links from their first moment: no router or
	// neighbour solicitations among the packets a test counts.
	for _, ns := range []string{b.NS, p.NSA} {
		for _, key := range []string{"net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.all.disable_ipv6"} {
			if err := sysctl(ns, key, "1"); err != nil {
				return b, err
			}
		}
	}
	steps := [][]string{
		{"link", "add", b.IfA, "netns", p.NSA, "type", "veth", "peer", "name", b.IfC, "netns", b.NS, "address", mac},
		{"-n", p.NSA, "link", "set", b.IfA, "up"},
		{"-n", b.NS, "link", "set", "lo", "up"},
		{"-n", b.NS, "addr", "add", addr.String() + "/24", "dev", b.IfC},
		{"-n", b.NS, "link", "set", b.IfC, "up"},
	}
	for a, m := range neigh {
		steps = append(steps, []string{"-n", b.NS, "neigh", "replace", a.String(), "lladdr", m, "dev", b.IfC, "nud", "permanent"})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Close removes C; the second pair goes with it.
func (b *Branch) Close() error {
	if err := ip("netns", "del", b.NS); err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return nil
}
