//go:build linux

package catalog_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// runDetail runs a link-local scenario and returns the link-local finding
// with its detail (the one whose detail holds the most payloads) and the
// generator's truth.
func runDetail(t *testing.T, name string) (*analyzer.Finding, *catalog.LinkLocalTruth, int64) {
	t.Helper()
	privtest.RequireRoot(t, "ip", "nft")
	s, ok := catalog.Lookup(name)
	if !ok {
		t.Fatalf("no %s scenario", name)
	}
	out, err := catalog.Run(context.Background(), s, capture.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("truth: %s", strings.Join(out.Truth.Notes, "; "))
	res := analyzer.Analyze(out.Recording, out.Analysis)
	var f *analyzer.Finding
	for i := range res.Findings {
		g := &res.Findings[i]
		if g.LinkLocal != nil && (f == nil || g.LinkLocal.Payloads > f.LinkLocal.Payloads) {
			f = g
		}
	}
	if f == nil {
		var kinds []string
		for _, g := range res.Findings {
			kinds = append(kinds, g.Kind)
		}
		t.Fatalf("no link-local finding with its detail (findings %v, %d payloads recorded)", kinds, len(out.Recording.LinkLocalPayloads))
	}
	t.Logf("%s: %s", f.Kind, f.Recommendation)
	return f, out.Truth.LinkLocal, out.Recording.Meta.Start.MonoNs
}

// TestDNSSearchPathScenario: the finding names the base name, the search
// list in its order, ndots:5, the NXDOMAIN share the client saw, and puts
// the search-path fix first.
func TestDNSSearchPathScenario(t *testing.T) {
	f, truth, _ := runDetail(t, "dns-search-path")
	if f.Kind != analyzer.KindLinkLocalExceeded {
		t.Errorf("finding %s, want linklocal_exceeded", f.Kind)
	}
	d := f.LinkLocal
	if d.Fixes[0].Kind != truth.Fix {
		t.Fatalf("first fix %+v, want %s", d.Fixes[0], truth.Fix)
	}
	dns := d.Clients[0].DNS
	if dns == nil || len(dns.Expansions) == 0 {
		t.Fatalf("client %+v: no DNS expansion", d.Clients[0])
	}
	x := dns.Expansions[0]
	if x.Base != truth.Base || !slices.Equal(x.Suffixes, truth.Search) || x.NDots != truth.NDots {
		t.Errorf("expansion %+v, want %s under %v with ndots %d", x, truth.Base, truth.Search, truth.NDots)
	}
	// The detail counts the answers in the finding's stretch, the client
	// those of the whole run (the allowance drops queries and answers, and
	// a lookup cut short changes the mix): both near 8 in 10.
	if math.Abs(dns.NXDomainShare-truth.NXDomainShare) > 0.05 || math.Abs(dns.ExpansionShare-0.8) > 0.05 {
		t.Errorf("NXDOMAIN share %.3f (client saw %.3f), expansion share %.3f, want 0.8", dns.NXDomainShare, truth.NXDomainShare, dns.ExpansionShare)
	}
	want := fmt.Sprintf("of these queries are search-path expansions of `%s` (ndots:%d implied", truth.Base, truth.NDots)
	if !strings.Contains(f.Recommendation, want) || !strings.Contains(f.Recommendation, "trailing dot") {
		t.Errorf("recommendation %q lacks %q", f.Recommendation, want)
	}
}

// TestIMDSCredentialStormScenario: the finding names the credentials path
// and a token per request, and puts reusing the token first.
func TestIMDSCredentialStormScenario(t *testing.T) {
	f, truth, _ := runDetail(t, "imds-credential-storm")
	d := f.LinkLocal
	if d.Fixes[0].Kind != truth.Fix || !strings.HasPrefix(d.Fixes[0].Text, "a new IMDSv2 token for every request") {
		t.Fatalf("first fix %+v, want %s", d.Fixes[0], truth.Fix)
	}
	im := d.Clients[0].IMDS
	if im == nil || !slices.Contains(im.CredentialPaths, truth.CredentialsPath) {
		t.Fatalf("client %+v: want IMDS reads of %s", d.Clients[0], truth.CredentialsPath)
	}
	// The client takes a token for every GET, and one more for each token
	// request the allowance dropped (no GET follows it): at least one. The
	// allowance drops GETs too, and TCP sends them again: each is one GET,
	// so the finding's stretch holds no more GETs than the client sent.
	t.Logf("imds: %d requests, %d retransmitted, %d token requests, %d GETs (the client sent %d)",
		im.Requests, im.Retransmitted, im.TokenRequests, im.GetsWithToken+im.GetsWithoutToken, truth.GETs)
	if gets := int64(im.GetsWithToken + im.GetsWithoutToken); gets > truth.GETs {
		t.Errorf("%d GETs counted, the client sent %d: a retransmission counted as a request", gets, truth.GETs)
	}
	if im.TokensPerGet < 1 || truth.TokensPerGet < 1 {
		t.Errorf("tokens per GET %.2f, the client sent %.2f: want a token per request", im.TokensPerGet, truth.TokensPerGet)
	}
	if !strings.Contains(f.Recommendation, "reuse it for its TTL; cache credentials (every AWS SDK does by default)") {
		t.Errorf("recommendation %q", f.Recommendation)
	}
}

// TestNTPChattyScenario: the finding counts the client's polls per second
// and puts polling less often first.
func TestNTPChattyScenario(t *testing.T) {
	f, truth, startNs := runDetail(t, "ntp-chatty")
	d := f.LinkLocal
	if d.Fixes[0].Kind != truth.Fix {
		t.Fatalf("first fix %+v, want %s", d.Fixes[0], truth.Fix)
	}
	// The polls the client sent in the stretch the detail looked at (the
	// send stamps and the datapath's differ by microseconds at its ends).
	from, to := startNs+int64(d.FromOffsetS*1e9), startNs+int64(d.ToOffsetS*1e9)
	sent := 0
	for _, ns := range truth.NTPSendNs {
		if ns >= from && ns < to {
			sent++
		}
	}
	n := d.Clients[0].NTP
	if n == nil || math.Abs(float64(n.Polls-sent)) > max(2, float64(sent)/100) || n.PollIntervalS != 1 {
		t.Errorf("ntp %+v, the client sent %d polls in [%.3f s, %.3f s)", n, sent, d.FromOffsetS, d.ToOffsetS)
	}
	if want := fmt.Sprintf("NTP polled %.1f times a second", n.PollsPerS); !strings.Contains(f.Recommendation, want) {
		t.Errorf("recommendation %q lacks %q", f.Recommendation, want)
	}
}
