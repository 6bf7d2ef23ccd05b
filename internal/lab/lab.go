package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/namedns"
)

// Lab is a running emulated EC2 instance: an "instance" network namespace
// whose interface (ens5) leads to a "VPC" namespace that enforces the
// allowances and serves IMDS, DNS and NTP on their link-local addresses.
type Lab struct {
	cfg Config
	id  string

	inst, vpc         *namedns.NS
	instNl, vpcNl     *netlink.Handle
	instLink, vpcLink netlink.Link
	containers        []*namedns.NS // AddContainer's and AddRemoteHost's
	remotes           int           // remote hosts added
	services          *serviceGroup
	sinks             *sinks

	// mu serializes counter reads with Close: netlink handles are not
	// safe for concurrent use.
	mu     sync.Mutex
	closed atomic.Bool
	// gauge is conntrack_allowance_available as a trace reads it, counted
	// in the background on a handle of its own.
	gauge *trackedGauge
}

// Up builds a lab. Its namespaces get fresh random names, so labs of
// parallel tests never collide. On any error everything already built is
// removed before Up returns.
func Up(ctx context.Context, cfg Config) (_ *Lab, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("lab config: %w", err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("lab id: %w", err)
	}
	l := &Lab{cfg: cfg, id: hex.EncodeToString(rnd[:]), services: &serviceGroup{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	steps := []struct {
		what string
		do   func() error
	}{
		{"namespaces", l.setupNamespaces},
		{"links", l.setupLinks},
		{"shaping", l.setupShaping},
		{"nftables", l.setupNftables},
		{"services", l.startServices},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lab up: %w", err)
		}
		if err := s.do(); err != nil {
			return nil, fmt.Errorf("lab up: %s: %w", s.what, err)
		}
		if upStepHook != nil {
			if err := upStepHook(l, s.what); err != nil {
				return nil, fmt.Errorf("lab up: %s: %w", s.what, err)
			}
		}
	}
	return l, nil
}

// upStepHook, set only by tests, runs after each step of Up and can fail
// it, to check that a partial Up leaves nothing behind.
var upStepHook func(l *Lab, step string) error

func (l *Lab) setupNamespaces() error {
	var err error
	if l.inst, err = namedns.New("enalab-" + l.id + "-inst"); err != nil {
		return err
	}
	if l.vpc, err = namedns.New("enalab-" + l.id + "-vpc"); err != nil {
		return err
	}
	// Without DAD, IPv6 (link-local addresses included, which neighbour
	// discovery needs) works the moment a link is up, not a second later.
	for _, ns := range []*namedns.NS{l.inst, l.vpc} {
		if err := ns.SetSysctls(map[string]string{"net/ipv6/conf/all/accept_dad": "0", "net/ipv6/conf/default/accept_dad": "0"}); err != nil {
			return err
		}
	}
	// Links, addresses, routes and qdiscs; conntrack (the emulated
	// conntrack_allowance_available) through netfilter.
	if l.instNl, err = l.inst.Netlink(unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER); err != nil {
		return err
	}
	if l.vpcNl, err = l.vpc.Netlink(unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER); err != nil {
		return err
	}
	gaugeNl, err := l.vpc.Netlink(unix.NETLINK_NETFILTER)
	if err != nil {
		return err
	}
	l.gauge = &trackedGauge{nl: gaugeNl}
	return nil
}

// Close stops the services and removes the veth pair (with its qdiscs and
// filters), the nftables tables and both namespaces. It removes each
// explicitly rather than trusting namespace teardown, which a socket leaked
// by a caller would silently postpone. It is safe on a partly built lab
// and idempotent.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	if l.gauge != nil {
		l.gauge.close()
	}
	if l.services != nil {
		errs = append(errs, l.services.close())
	}
	if l.instNl != nil {
		if link, err := l.instNl.LinkByName(instanceIfc); err == nil {
			if err := l.instNl.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", instanceIfc, err))
			}
		}
		l.instNl.Close()
	}
	if l.vpcNl != nil {
		// Deleting one end deletes the pair; this catches a half-made one.
		if link, err := l.vpcNl.LinkByName(vpcIfc); err == nil {
			if err := l.vpcNl.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", vpcIfc, err))
			}
		}
		l.vpcNl.Close()
	}
	// A container's veth goes with its namespace.
	for _, ns := range l.containers {
		errs = append(errs, ns.Close())
	}
	// A netdev table outlives its device: flush both rulesets before the
	// namespaces go, so one held open elsewhere is left empty.
	for _, ns := range []*namedns.NS{l.vpc, l.inst} {
		if ns == nil {
			continue
		}
		if _, err := ns.Run(nil, "nft", "flush", "ruleset"); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, ns.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab close: %w", err)
	}
	return nil
}

// Config returns the lab's configuration with defaults filled in.
func (l *Lab) Config() Config { return l.cfg }

// ID is the random part of the lab's namespace names.
func (l *Lab) ID() string { return l.id }

// InstanceNetns is the instance namespace's name, for `ip netns exec`.
func (l *Lab) InstanceNetns() string { return l.inst.Name }

// InstanceNetnsPath is the instance namespace's bind mount, for setns.
func (l *Lab) InstanceNetnsPath() string { return l.inst.Path() }

// VPCNetns is the VPC namespace's name.
func (l *Lab) VPCNetns() string { return l.vpc.Name }

// VPCNetnsPath is the VPC namespace's bind mount.
func (l *Lab) VPCNetnsPath() string { return l.vpc.Path() }

// InstanceInterface is the instance's interface name (in its namespace):
// the one to trace, standing for the ENA device.
func (l *Lab) InstanceInterface() string { return instanceIfc }

// InstanceIfindex is the instance interface's index in its namespace.
func (l *Lab) InstanceIfindex() int { return l.instLink.Attrs().Index }

// InstanceMAC is the instance interface's hardware address.
func (l *Lab) InstanceMAC() net.HardwareAddr { return l.instLink.Attrs().HardwareAddr }

// VPCInterface is the VPC end of the veth, in the VPC namespace.
func (l *Lab) VPCInterface() string { return vpcIfc }

// InInstance runs fn on the calling goroutine with its OS thread locked in
// the instance namespace (setns), then moves the thread back. Sockets and
// eBPF links fn creates stay in the instance namespace; goroutines fn
// starts do not run there.
func (l *Lab) InInstance(fn func() error) error { return l.inst.Do(fn) }

// InVPC is InInstance for the VPC namespace.
func (l *Lab) InVPC(fn func() error) error { return l.vpc.Do(fn) }

// DialInstance dials from inside the instance namespace. The address must
// be an IP literal: name resolution would run on other threads, outside
// the namespace. It suits http.Transport.DialContext.
func (l *Lab) DialInstance(ctx context.Context, network, address string) (net.Conn, error) {
	if _, err := netip.ParseAddrPort(address); err != nil {
		return nil, fmt.Errorf("dial from instance: %q is not an IP:port literal", address)
	}
	var conn net.Conn
	err := l.InInstance(func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s from instance: %w", network, address, err)
	}
	return conn, nil
}
