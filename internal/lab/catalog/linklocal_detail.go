//go:build linux

package catalog

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/record"
)

// Scenarios for the link-local detail: what the offender asks.

// heldoutName is the name the search-path scenario looks up; the lab's
// resolver knows it, and none of its expansions.
const heldoutName = "api.heldout-shop.example"

// dnsSearchPath is an application in a pod resolving one name through the
// pod's resolv.conf (ndots:5, the Kubernetes search list): a Go emulation
// of glibc's order, 10 queries per lookup (4 suffixes and the name, A and
// AAAA each), 8 of them NXDOMAIN, a new socket per lookup.
func dnsSearchPath() Scenario {
	return Scenario{
		Name:       "dns-search-path",
		Summary:    "150 lookups/s of " + heldoutName + " through a pod's resolv.conf (ndots:5, the Kubernetes search list): 10 queries a lookup, 8 NXDOMAIN",
		Expect:     "linklocal_exceeded whose first fix is the search-path expansion of " + heldoutName + " (ndots:5 implied), 80% NXDOMAIN",
		Lab:        func() lab.Config { return withHeldout(lab.DefaultConfig()) },
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			spec := lab.ResolverSpec{Name: heldoutName, Search: lab.KubernetesSearch("default"), NDots: lab.KubernetesNDots,
				Rate: 150, Duration: 3 * time.Second}
			r, err := l.Resolve(ctx, spec)
			if err != nil {
				return Truth{}, err
			}
			share := 0.0
			if r.Answers > 0 {
				share = float64(r.NXDomain) / float64(r.Answers)
			}
			return Truth{
				Notes: []string{fmt.Sprintf("%d lookups, %d resolved: %d queries (%d resent), %d answers, %d NXDOMAIN; tried %s",
					r.Lookups, r.Resolved, r.Queries, r.Resent, r.Answers, r.NXDomain, strings.Join(r.Candidates, ", "))},
				LinkLocal: &LinkLocalTruth{Fix: "search_path", Base: heldoutName, Search: spec.Search, NDots: spec.NDots, NXDomainShare: share},
			}, nil
		},
	}
}

func withHeldout(c lab.Config) lab.Config {
	c.DNSRecords = map[string][]netip.Addr{heldoutName + ".": {lab.PeerAddr, lab.PeerAddr6}}
	return c
}

// imdsCredentialStorm is a process that takes a new IMDSv2 token before
// every credentials read, each request on a new connection, 120 reads/s.
func imdsCredentialStorm() Scenario {
	return Scenario{
		Name:       "imds-credential-storm",
		Summary:    "120 credential reads/s from IMDS, each after a new IMDSv2 token, each request on a new connection",
		Expect:     "linklocal_exceeded whose first fix is reusing the IMDSv2 token, naming " + lab.IMDSCredentialsPath,
		Lab:        lab.DefaultConfig,
		CounterLag: 20 * time.Millisecond, SampleInterval: 10 * time.Millisecond,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			tokens, gets, err := credentialStorm(ctx, l, 120, 3*time.Second)
			if err != nil {
				return Truth{}, err
			}
			per := 0.0
			if gets > 0 {
				per = float64(tokens) / float64(gets)
			}
			return Truth{Notes: []string{fmt.Sprintf("%d token requests, %d credential GETs", tokens, gets)},
				LinkLocal: &LinkLocalTruth{Fix: "imds_token", CredentialsPath: lab.IMDSCredentialsPath, TokensPerGet: per, GETs: gets}}, nil
		},
	}
}

// stormWorkers bounds the reads in flight.
const stormWorkers = 32

// credentialStorm reads the credentials rate times a second for d, each
// read a PUT for a token then the GET with it, on new connections. It
// returns the requests sent (not those answered: the allowance drops some).
func credentialStorm(ctx context.Context, l *lab.Lab, rate float64, d time.Duration) (tokens, gets int64, err error) {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: l.DialInstance, DisableKeepAlives: true}}
	const base = "http://169.254.169.254"
	var nTok, nGet atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, stormWorkers)
	read := func() {
		defer wg.Done()
		defer func() { <-sem }()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
		if err != nil {
			return
		}
		req.Header.Set(lab.IMDSTokenTTLHeader, "21600")
		nTok.Add(1)
		resp, err := hc.Do(req)
		if err != nil {
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+lab.IMDSCredentialsPath, nil)
		if err != nil {
			return
		}
		req.Header.Set(lab.IMDSTokenHeader, strings.TrimSpace(string(b)))
		nGet.Add(1)
		if resp, err = hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	total := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for k := 0; k < total && ctx.Err() == nil; k++ {
		if wait := time.Until(start.Add(time.Duration(k) * interval)); wait > 0 {
			time.Sleep(wait) // pacing a generator, not synchronising a test
		}
		sem <- struct{}{}
		wg.Add(1)
		go read()
	}
	wg.Wait()
	return nTok.Load(), nGet.Load(), nil
}

// ntpChatty is an NTP client polling 800 times a second: hot, near the
// link-local limit (a pacer catching up on a busy host goes over it).
func ntpChatty() Scenario {
	const rate = 800
	return Scenario{
		Name:    "ntp-chatty",
		Summary: "an NTP client polling the Time Sync Service 800 times a second",
		Expect:  "linklocal_hot (or _exceeded) whose first fix is polling NTP less often, with the client's polls per second",
		Lab:     lab.DefaultConfig,
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			r, err := l.LinkLocal(ctx, lab.LinkLocalSpec{Service: record.ServiceNTP, Rate: rate, Duration: 3 * time.Second})
			if err != nil {
				return Truth{}, err
			}
			return Truth{Culprit: r.Src, Notes: []string{fmt.Sprintf("NTP answered %d of %d", r.Answered, r.Sent)},
				LinkLocal: &LinkLocalTruth{Fix: "ntp_poll", NTPSendNs: r.SendNs}}, nil
		},
	}
}
