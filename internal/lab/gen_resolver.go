package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/enaprobe/enaprobe/internal/limits"
)

// ResolverSpec is an application resolving one name through a resolv.conf
// (search list and ndots), by a Go emulation of glibc's stub resolver
// order: a name with fewer dots than NDots is tried under each search
// suffix in turn, then as it is; a name with NDots dots or more as it is
// first, then under the suffixes. Each candidate is asked A then AAAA; a
// query without an answer within Timeout is sent again with the same id
// (Attempts in all), as glibc's options timeout and attempts do; the first
// candidate answered with an address ends the lookup. Every lookup opens a
// socket of its own (a new source port), as glibc does for each call.
type ResolverSpec struct {
	Name     string
	Search   []string
	NDots    int
	Rate     float64 // lookups per second
	Duration time.Duration
	Timeout  time.Duration // 0: 200 ms
	Attempts int           // 0: 2
	// Server is the resolver's address (0: 169.254.169.253).
	Server netip.Addr
}

// KubernetesSearch is the search list the kubelet writes into a pod's
// resolv.conf in namespace ns, on an EC2 host in region's VPC DNS domain
// (ec2.internal in us-east-1), with ndots:5.
func KubernetesSearch(ns string) []string {
	return []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local", "ec2.internal"}
}

// KubernetesNDots is the kubelet's ndots.
const KubernetesNDots = 5

// ResolverResult is what the lookups sent and got.
type ResolverResult struct {
	Lookups  int
	Resolved int // lookups that got an address
	Queries  int // queries sent, resends included
	Resent   int
	Answers  int
	NXDomain int // answers NXDOMAIN
	// Candidates are the names a lookup tries, in order.
	Candidates []string
}

// resolverWorkers bounds the lookups in flight.
const resolverWorkers = 64

// Resolve runs the lookups from the instance namespace.
func (l *Lab) Resolve(ctx context.Context, spec ResolverSpec) (ResolverResult, error) {
	if err := checkDuration(spec.Duration); err != nil {
		return ResolverResult{}, fmt.Errorf("resolver: %w", err)
	}
	total := int(spec.Rate * spec.Duration.Seconds())
	if total < 1 || total*2*(len(spec.Search)+1) > maxPacketsPerRun {
		return ResolverResult{}, fmt.Errorf("resolver: %d lookups of up to %d queries each: too many or none", total, 2*(len(spec.Search)+1))
	}
	if spec.Timeout == 0 {
		spec.Timeout = 200 * time.Millisecond
	}
	if spec.Attempts == 0 {
		spec.Attempts = 2
	}
	if !spec.Server.IsValid() {
		spec.Server = limits.DNSv4
	}
	res := ResolverResult{Candidates: candidates(spec.Name, spec.Search, spec.NDots)}
	var queries, resent, answers, nx, resolved atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, resolverWorkers)
	var firstErr error
	var errOnce sync.Once
	server := net.UDPAddrFromAddrPort(netip.AddrPortFrom(spec.Server, dnsPort))
	paceErr := pace(ctx, total, time.Duration(float64(time.Second)/spec.Rate), func(int) error {
		var conn *net.UDPConn
		if err := l.InInstance(func() error {
			var err error
			conn, err = net.DialUDP("udp", nil, server)
			return err
		}); err != nil {
			return fmt.Errorf("resolver: dial %s: %w", server, err)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer conn.Close()
			c := lookupCounts{}
			ok, err := lookup(ctx, conn, res.Candidates, spec.Timeout, spec.Attempts, &c)
			queries.Add(c.queries)
			resent.Add(c.resent)
			answers.Add(c.answers)
			nx.Add(c.nx)
			if ok {
				resolved.Add(1)
			}
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		}()
		return nil
	})
	wg.Wait()
	res.Lookups = total
	res.Resolved, res.Queries, res.Resent = int(resolved.Load()), int(queries.Load()), int(resent.Load())
	res.Answers, res.NXDomain = int(answers.Load()), int(nx.Load())
	if paceErr != nil {
		return res, fmt.Errorf("resolver: %w", paceErr)
	}
	return res, firstErr
}

// candidates are the names glibc tries for name, in order.
func candidates(name string, search []string, ndots int) []string {
	name = strings.TrimSuffix(name, ".")
	var suffixed []string
	for _, s := range search {
		suffixed = append(suffixed, name+"."+s)
	}
	if strings.Count(name, ".") >= ndots {
		return append([]string{name}, suffixed...)
	}
	return append(suffixed, name)
}

type lookupCounts struct{ queries, resent, answers, nx int64 }

// lookup asks the candidates on conn, A then AAAA each, until one has an
// address.
func lookup(ctx context.Context, conn *net.UDPConn, names []string, timeout time.Duration, attempts int, c *lookupCounts) (bool, error) {
	buf := make([]byte, 1500)
	for _, n := range names {
		found := false
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(n), qt)
			m.Id = uint16(rand.Uint32())
			q, err := m.Pack()
			if err != nil {
				return false, fmt.Errorf("pack query for %s: %w", n, err)
			}
			for a := range attempts {
				if ctx.Err() != nil {
					return false, nil
				}
				if _, err := conn.Write(q); err != nil {
					return false, fmt.Errorf("send query for %s: %w", n, err)
				}
				c.queries++
				if a > 0 {
					c.resent++
				}
				resp, ok := readAnswer(conn, buf, m.Id, timeout)
				if !ok {
					continue
				}
				c.answers++
				if resp.Rcode == dns.RcodeNameError {
					c.nx++
				}
				found = found || len(resp.Answer) > 0
				break
			}
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// readAnswer waits up to timeout for the answer of id on conn.
func readAnswer(conn *net.UDPConn, buf []byte, id uint16, timeout time.Duration) (*dns.Msg, bool) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, false
		}
		var m dns.Msg
		if m.Unpack(buf[:n]) == nil && m.Response && m.Id == id {
			return &m, true
		}
	}
}
