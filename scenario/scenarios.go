//go:build linux

package scenario

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/lab"
	"github.com/enaprobe/enaprobe/record"
)

// The scenarios run against the lab's defaults (a c5.large scaled down about
// 20x: 40 Mbit/s each way, 10 Mbit/s per flow, 1024 link-local packets/s),
// changed where a scenario needs it.

func microBurst() Scenario {
	return Scenario{
		Name:    "micro-burst",
		Summary: "steady flows well under the bandwidth allowance, and two short bursts from one flow over it",
		Expect:  "microburst_out at each burst, naming the burst's flow; the 1-minute average far below the allowance",
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.OutBurst = 16 << 10 // a small credit bucket: a burst of 300 kB overflows it
			return c
		},
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			var t Truth
			bg := make(chan error, 1)
			go func() {
				_, err := l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 3, Rate: 2_000_000, PacketSize: 1000, Duration: 3 * time.Second})
				bg <- err
			}()
			for i := 0; i < 2; i++ {
				time.Sleep(time.Second)
				b, err := l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200})
				if err != nil {
					return t, err
				}
				t.Bursts = append(t.Bursts, Burst{StartNs: b.StartNs, EndNs: b.EndNs, Src: b.Src})
			}
			return t, <-bg
		},
	}
}

func flowAtCap() Scenario {
	return Scenario{
		Name:    "flow-at-cap",
		Summary: "one TCP upload held by the per-flow cap for seconds, the aggregate allowance never reached",
		Expect:  "flow_at_cap for the upload's flow, and no counter moved",
		Lab:     lab.DefaultConfig,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			r, err := l.TCPBulk(ctx, lab.TCPBulkSpec{Duration: 6 * time.Second})
			if err != nil {
				return Truth{}, err
			}
			return Truth{
				Culprit: netip.AddrPortFrom(lab.InstanceAddr, 0), // the source port is the kernel's choice
				Notes:   []string{fmt.Sprintf("the receiver got %.2f Mbit/s", r.Bps()/1e6)},
			}, nil
		},
	}
}

func linkLocal() Scenario {
	return Scenario{
		Name:    "link-local",
		Summary: "one client asks DNS 1500 times a second, another NTP 10 times a second, on one interface",
		Expect:  "linklocal_exceeded naming the DNS client's flow first; NTP starved along with it",
		Lab:     lab.DefaultConfig,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			ntp := make(chan error, 1)
			go func() {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: 10, Duration: 3 * time.Second})
				ntp <- err
			}()
			dns, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: 1500, Duration: 3 * time.Second})
			if err != nil {
				return Truth{}, err
			}
			if err := <-ntp; err != nil {
				return Truth{}, err
			}
			return Truth{Culprit: dns.Src, Notes: []string{fmt.Sprintf("DNS answered %d of %d", dns.Answered, dns.Sent)}}, nil
		},
	}
}

func connFlood() Scenario {
	return Scenario{
		Name:    "connection-flood",
		Summary: "600 new TCP connections at once against a connection-tracking allowance of 300",
		Expect:  "conntrack_exceeded naming the instance as the SYN source",
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.ConntrackMax = 300
			return c
		},
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			r, err := l.ConnFlood(ctx, lab.ConnFloodSpec{Count: 600, Timeout: time.Second, Hold: time.Second})
			if err != nil {
				return Truth{}, err
			}
			return Truth{
				Culprit: netip.AddrPortFrom(lab.InstanceAddr, 0),
				Notes:   []string{fmt.Sprintf("%d established, %d failed", r.Established, r.Failed)},
			}, nil
		},
	}
}

func clean() Scenario {
	return Scenario{
		Name:    "clean",
		Summary: "steady traffic under every allowance: UDP flows, a few DNS and NTP queries",
		Expect:  "no finding above info",
		Lab:     lab.DefaultConfig,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			errs := make(chan error, 2)
			go func() {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: 20, Duration: 3 * time.Second})
				errs <- err
			}()
			go func() {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: 2, Duration: 3 * time.Second})
				errs <- err
			}()
			_, err := l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 4, Rate: 1_500_000, PacketSize: 1200, Duration: 3 * time.Second})
			for range 2 {
				if e := <-errs; err == nil {
					err = e
				}
			}
			return Truth{}, err
		},
	}
}
