//go:build linux

package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
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
			err := together(func() error {
				_, err := l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 3, Rate: 2_000_000, PacketSize: 1000, Duration: 3 * time.Second})
				return err
			}, func() error {
				for i := 0; i < 2; i++ {
					time.Sleep(time.Second)
					b, err := l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200})
					if err != nil {
						return err
					}
					t.Bursts = append(t.Bursts, Burst{StartNs: b.StartNs, EndNs: b.EndNs, Src: b.Src})
				}
				return nil
			})
			return t, err
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
			var dns lab.LinkLocalResult
			err := together(func() error {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: 10, Duration: 3 * time.Second})
				return err
			}, func() (err error) {
				dns, err = l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: 1500, Duration: 3 * time.Second})
				return err
			})
			if err != nil {
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
			err := together(func() error {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: 20, Duration: 3 * time.Second})
				return err
			}, func() error {
				_, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: 2, Duration: 3 * time.Second})
				return err
			}, func() error {
				_, err := l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 4, Rate: 1_500_000, PacketSize: 1200, Duration: 3 * time.Second})
				return err
			})
			return Truth{}, err
		},
	}
}

// together runs traffic generators at the same time and returns their
// errors joined, once all are done.
func together(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
