//go:build linux

package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/record"
)

// The scenarios run against the lab's defaults (a c5.large scaled down about
// 20x: 40 Mbit/s each way, 10 Mbit/s per flow, 1024 link-local packets/s),
// changed where a scenario needs it.

func microBurst() Scenario {
	return Scenario{
		Name:    "micro-burst",
		Summary: "steady flows well under the bandwidth allowance, and two short bursts from one flow over it",
		Expect:  "one microburst_out per burst, naming the burst's flow; the 1-minute average far below the allowance",
		// Counters that show a drop 20 ms late, read every 10 ms.
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.OutBurst = 16 << 10 // a small credit bucket: a burst of 300 kB overflows it
			return c
		},
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			var t Truth
			var steady lab.UDPFlowsResult
			err := together(func() error {
				var err error
				steady, err = l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 3, Rate: 2_000_000, PacketSize: 1000, Duration: 3 * time.Second})
				return err
			}, func() error {
				for i := 0; i < 2; i++ {
					time.Sleep(time.Second)
					b, err := l.Burst(ctx, lab.BurstSpec{Packets: 250, PacketSize: 1200})
					if err != nil {
						return err
					}
					t.Bursts = append(t.Bursts, Burst{StartNs: b.StartNs, EndNs: b.EndNs, Src: b.Src, PauseNs: b.PauseNs, FirstSentNs: b.FirstSentNs})
				}
				return nil
			})
			if steady.Skipped > 0 {
				t.Notes = append(t.Notes, fmt.Sprintf("the steady flows skipped %d of their packets on late wakes (a busy host), to stay steady", steady.Skipped))
			}
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
		Name:       "link-local",
		Summary:    "one client asks DNS 1500 times a second, another NTP 10 times a second, on one interface",
		Expect:     "one linklocal_exceeded naming the DNS client's flow first; NTP starved along with it",
		Lab:        lab.DefaultConfig,
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			return dnsClient(ctx, l, 1500, 3*time.Second, 10)
		},
	}
}

func ppsOvershoot() Scenario {
	return Scenario{
		Name:    "pps-overshoot",
		Summary: "three flows of small packets at 12,000 packets/s together for 2 s, over the 8,000 packets/s allowance",
		Expect:  "one pps_exceeded naming a small-packet flow; with --allowance unknown, the allowance learned from the run within 15% of 8 kpps",
		Lab:     lab.DefaultConfig,
		// Counters that show a drop 20 ms late, read every 10 ms.
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			r, err := l.UDPFlows(ctx, lab.UDPFlowsSpec{Flows: 3, Rate: 4000 * 64 * 8, PacketSize: 64, Duration: 2 * time.Second, CatchUp: true})
			t := Truth{Culprit: netip.AddrPortFrom(lab.InstanceAddr, 0)}
			t.Notes = append(t.Notes, fmt.Sprintf("sent %d packets in %v (%.0f packets/s), %d skipped on late wakes", r.Sent, r.Elapsed.Round(time.Millisecond),
				float64(r.Sent)/r.Elapsed.Seconds(), r.Skipped))
			return t, err
		},
	}
}

func linkLocalMild() Scenario {
	return Scenario{
		Name:       "link-local-mild",
		Summary:    "one client asks DNS 1100 times a second for 4 s: a mild overshoot of the 1024 pps limit, a drop every 13 ms",
		Expect:     "one linklocal_exceeded from the first drop to the last, naming the DNS client",
		Lab:        lab.DefaultConfig,
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) { return dnsClient(ctx, l, 1100, 4*time.Second, 0) },
	}
}

// dnsClient runs a DNS client at rate, and an NTP client at ntpRate when
// not 0, and tells when the lab's link-local limit dropped their packets.
func dnsClient(ctx context.Context, l *lab.Lab, rate float64, d time.Duration, ntpRate float64) (Truth, error) {
	var dns, ntp lab.LinkLocalResult
	err := together(func() (err error) {
		if ntpRate > 0 {
			ntp, err = l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: ntpRate, Duration: d})
		}
		return err
	}, func() (err error) {
		dns, err = l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceDNS, Rate: rate, Duration: d})
		return err
	})
	if err != nil {
		return Truth{}, err
	}
	t := Truth{Culprit: dns.Src, Notes: []string{fmt.Sprintf("DNS answered %d of %d", dns.Answered, dns.Sent)}}
	c := l.Config()
	sends := append(slices.Clone(dns.SendNs), ntp.SendNs...)
	slices.Sort(sends)
	if len(dns.SendNs) > 0 {
		// The flood itself: the limit's burst lets it run over before the
		// first drop.
		t.Bursts = []Burst{{StartNs: dns.SendNs[0], EndNs: dns.SendNs[len(dns.SendNs)-1], Src: dns.Src}}
	}
	if first, last, n := limitDrops(sends, float64(c.LinkLocalPPS), float64(c.LinkLocalBurst)); n > 0 {
		t.Incidents = []Burst{{StartNs: first, EndNs: last, Src: dns.Src}}
		t.Notes = append(t.Notes, fmt.Sprintf("the link-local limit dropped %d packets by its model", n))
	}
	return t, nil
}

// limitDrops replays send times through an nftables packet limit (a token
// bucket of burst packets, full at the start, refilled at rate per second,
// as nft_limit_eval) and returns its first and last drop and how many.
func limitDrops(sendNs []int64, rate, burst float64) (first, last int64, n int) {
	costNs := math.Floor(1e9 / rate)
	tokens := costNs * burst
	var prev int64
	for i, at := range sendNs {
		if i > 0 {
			tokens = math.Min(tokens+float64(at-prev), costNs*burst)
		}
		prev = at
		if tokens >= costNs {
			tokens -= costNs
			continue
		}
		if n == 0 {
			first = at
		}
		last = at
		n++
	}
	return first, last, n
}

func connFlood() Scenario {
	const conns, tracked = 300, 150
	return Scenario{
		Name:    "connection-flood",
		Summary: "300 new TCP connections in a second against a connection-tracking allowance of 150; the refused ones retried every second for 3.5 s",
		Expect:  "one conntrack_exceeded from the first refused SYN to the last retry, naming the instance and the port, with the retries",
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.ConntrackMax = tracked
			return c
		},
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			before, err := l.ReadCounters()
			if err != nil {
				return Truth{}, err
			}
			// A timeout past the retry 3 s after the first SYN (the third on
			// Linux 6.7+, the second before).
			r, err := l.ConnFlood(ctx, lab.ConnFloodSpec{Count: conns, Over: time.Second, Timeout: 3500 * time.Millisecond,
				Hold: 200 * time.Millisecond})
			if err != nil {
				return Truth{}, err
			}
			t := Truth{
				Culprit: netip.AddrPortFrom(lab.InstanceAddr, 0),
				Notes:   []string{fmt.Sprintf("%d established, %d failed", r.Established, r.Failed)},
			}
			// The first refused SYN is the one past what was available;
			// the last drop is the second retry of the last refused.
			free := int(before[counters.ConntrackAllowanceAvailable])
			var lastRefused int64
			for _, a := range r.Attempts {
				if !a.Established {
					lastRefused = max(lastRefused, a.StartNs)
				}
			}
			if free < len(r.Attempts) && lastRefused > 0 {
				t.Incidents = []Burst{{StartNs: r.Attempts[free].StartNs, EndNs: lastRefused + int64(3*time.Second),
					Src: netip.AddrPortFrom(lab.InstanceAddr, 0)}}
			}
			return t, nil
		},
	}
}

func clean() Scenario {
	return Scenario{
		Name:    "clean",
		Summary: "steady traffic under every allowance: UDP flows, a few DNS and NTP queries",
		Expect:  "no finding",
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
