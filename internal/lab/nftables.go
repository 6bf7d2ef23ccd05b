package lab

import (
	"bytes"
	"errors"
	"fmt"
	"text/template"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/namedns"
)

// The VPC namespace's nftables ruleset. It stands where EC2 enforces these
// allowances, outside the instance, so the instance namespace keeps no
// rules of ours.
//
//   - netdev ingress and egress on the VPC end of the veth: every packet
//     from and to the instance, before any IP processing. One named limit
//     shared by both chains is the bidirectional packets/s allowance; a
//     second limit covers packets to the link-local services (and the
//     resolver at VPC base+2, also Amazon DNS). A third, in bytes, counts
//     without dropping the inbound packets over the bandwidth allowance as
//     they are offered, before the tbf queues or drops them: an ENA counts a
//     packet when it is queued, not when the queue drains.
//   - inet: connection tracking. Traffic to and from the link-local services
//     is not tracked (security groups never see it on EC2). Every other new
//     connection, from the instance (prerouting) or toward it (output), goes
//     into one conncount list: a dynamic set element keyed by the interface
//     name, which both chains name alike, so both directions share one cap.
//
// The drops of each allowance land in a named counter, read by Counters.
const nftRuleset = `table netdev enalab {
	counter pps_exceeded {}
	counter linklocal_exceeded {}
	counter bw_in_exceeded {}
	limit pps { rate over {{.PPS}}/second burst {{.PPSBurst}} packets }
	limit bw_in { rate over {{.InBytes}} bytes/second burst {{.InBurst}} bytes }
	limit linklocal { rate over {{.LinkLocalPPS}}/second burst {{.LinkLocalBurst}} packets }
	set linklocal4 { type ipv4_addr; flags interval; elements = { {{.LinkLocal4}} } }
	set linklocal6 { type ipv6_addr; elements = { {{.LinkLocal6}} } }
	chain from_instance {
		type filter hook ingress device "{{.Ifc}}" priority filter; policy accept;
		limit name "pps" counter name "pps_exceeded" drop
		ip daddr @linklocal4 limit name "linklocal" counter name "linklocal_exceeded" drop
		ip6 daddr @linklocal6 limit name "linklocal" counter name "linklocal_exceeded" drop
	}
	chain to_instance {
		type filter hook egress device "{{.Ifc}}" priority filter; policy accept;
		limit name "pps" counter name "pps_exceeded" drop
		limit name "bw_in" counter name "bw_in_exceeded"
	}
}
table inet enalab {
	counter conntrack_exceeded {}
	set untracked4 { type ipv4_addr; flags interval; elements = { {{.LinkLocal4}} } }
	set untracked6 { type ipv6_addr; elements = { {{.LinkLocal6}} } }
	set conntrack_cap { type ifname; size 4; flags dynamic; }
	chain untrack_from_instance {
		type filter hook prerouting priority raw; policy accept;
		iifname "{{.Ifc}}" ip daddr @untracked4 notrack
		iifname "{{.Ifc}}" ip6 daddr @untracked6 notrack
	}
	chain untrack_to_instance {
		type filter hook output priority raw; policy accept;
		oifname "{{.Ifc}}" ip saddr @untracked4 notrack
		oifname "{{.Ifc}}" ip6 saddr @untracked6 notrack
	}
	chain from_instance {
		type filter hook prerouting priority mangle; policy accept;
		iifname "{{.Ifc}}" ct state new add @conntrack_cap { iifname ct count over {{.ConntrackMax}} } counter name "conntrack_exceeded" drop
	}
	chain to_instance {
		type filter hook output priority mangle; policy accept;
		oifname "{{.Ifc}}" ct state new add @conntrack_cap { oifname ct count over {{.ConntrackMax}} } counter name "conntrack_exceeded" drop
	}
}
`

// The instance namespace's ruleset: one netdev egress chain on the
// instance's interface that counts, without dropping, the outbound packets
// over the bandwidth allowance as they are offered (the tbf on the same
// interface then shapes them). It runs before the qdisc, and before a
// tracer's tcx egress hook, which still sees every packet.
//
// With a peak rate, a packet over it counts too, once: each limit jumps to
// the counting chain with goto, which does not come back.
const nftInstanceRuleset = `table netdev enalab {
	counter bw_out_exceeded {}
	limit bw_out { rate over {{.OutBytes}} bytes/second burst {{.OutBurst}} bytes }
{{- if .OutPeakBytes}}
	limit bw_out_peak { rate over {{.OutPeakBytes}} bytes/second burst {{.PeakBurst}} bytes }
{{- end}}
	chain over {
		counter name "bw_out_exceeded"
	}
	chain offered {
		type filter hook egress device "{{.Ifc}}" priority filter; policy accept;
		limit name "bw_out" goto over
{{- if .OutPeakBytes}}
		limit name "bw_out_peak" goto over
{{- end}}
	}
}
`

var (
	nftTemplate         = template.Must(template.New("ruleset").Parse(nftRuleset))
	nftInstanceTemplate = template.Must(template.New("instance").Parse(nftInstanceRuleset))
)

// Counter names in the ruleset.
const (
	nftPPSExceeded       = "pps_exceeded"
	nftLinkLocalExceeded = "linklocal_exceeded"
	nftConntrackExceeded = "conntrack_exceeded"
	nftBWInExceeded      = "bw_in_exceeded"
	nftBWOutExceeded     = "bw_out_exceeded"
)

// nftData is what the rulesets are rendered from. The bandwidth limits see
// GSO super-packets whole: a bucket under 64 KiB counts every one as over.
type nftData struct {
	Config
	Ifc                    string
	LinkLocal4, LinkLocal6 string
	InBytes, OutBytes      uint64 // bandwidth allowances in bytes/s
	OutPeakBytes           uint64
	// PeakBurst lets one GSO super-packet (up to 64 KiB, seen whole before
	// segmentation) through at the peak rate.
	PeakBurst uint32
}

func (l *Lab) nftRuleset(t *template.Template, ifc string) ([]byte, error) {
	data := nftData{
		Config:       l.cfg,
		Ifc:          ifc,
		LinkLocal4:   fmt.Sprintf("%s, %s", LinkLocalServices, ResolverAddr),
		LinkLocal6:   fmt.Sprintf("%s, %s, %s", limits.IMDSv6, limits.DNSv6, limits.NTPv6),
		InBytes:      l.cfg.InRate / 8,
		OutBytes:     l.cfg.OutRate / 8,
		OutPeakBytes: l.cfg.OutPeakRate / 8,
		PeakBurst:    64<<10 + maxPacketBytes,
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render nftables ruleset %s: %w", t.Name(), err)
	}
	return b.Bytes(), nil
}

func (l *Lab) setupNftables() error {
	for _, r := range []struct {
		ns  *namedns.NS
		t   *template.Template
		ifc string
	}{{l.vpc, nftTemplate, vpcIfc}, {l.inst, nftInstanceTemplate, instanceIfc}} {
		rules, err := l.nftRuleset(r.t, r.ifc)
		if err != nil {
			return err
		}
		if _, err := r.ns.Run(rules, "nft", "-f", "-"); err != nil {
			return fmt.Errorf("load nftables ruleset %s: %w", r.t.Name(), err)
		}
	}
	return nil
}

// nftCounters returns the packets of every named counter of the lab's
// tables in both namespaces, over netlink: an `nft -j list counters` exec
// took 25 ms and more on a busy 2-core host, most of a counter read, and
// kept the lab from being read every 10 ms. sampled is when each was
// read: the middle of the dump that returned it (CLOCK_MONOTONIC).
func (l *Lab) nftCounters() (map[string]uint64, map[string]int64, error) {
	all, sampled := map[string]uint64{}, map[string]int64{}
	for _, ns := range []*namedns.NS{l.vpc, l.inst} {
		conn, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle)))
		if err != nil {
			return nil, nil, fmt.Errorf("nftables in %s: %w", ns.Name, err)
		}
		for _, family := range []nftables.TableFamily{nftables.TableFamilyNetdev, nftables.TableFamilyINet} {
			start := monoclock.Now()
			objs, err := conn.GetNamedObjects(&nftables.Table{Name: nftTableName, Family: family})
			at := start + (monoclock.Now()-start)/2
			if errors.Is(err, unix.ENOENT) {
				continue // the instance has no inet table
			}
			if err != nil {
				return nil, nil, fmt.Errorf("list nftables counters in %s: %w", ns.Name, err)
			}
			for _, o := range objs {
				if no, ok := o.(*nftables.NamedObj); ok {
					if c, ok := no.Obj.(*expr.Counter); ok {
						all[no.Name], sampled[no.Name] = c.Packets, at
					}
				}
			}
		}
	}
	return all, sampled, nil
}

// nftTableName is the name of the lab's tables in both namespaces.
const nftTableName = "enalab"
