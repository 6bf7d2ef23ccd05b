package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
)

// The link-local detail of a linklocal_exceeded or linklocal_hot finding:
// the fixes ranked, then per client what it asked, as rows of (what,
// detail) shared by the text and the HTML report.

// linkLocalFixTexts are the ranked fixes, each with the share of the
// copied link-local packets it addresses.
func linkLocalFixTexts(d *analyzer.LinkLocalDetail) []string {
	out := make([]string, 0, len(d.Fixes))
	for i, f := range d.Fixes {
		out = append(out, fmt.Sprintf("%d. %s (%s of the link-local packets copied)", i+1, f.Text, fmtShare(f.Share)))
	}
	return out
}

// linkLocalBasis says what the detail rests on, and what it missed.
func linkLocalBasis(d *analyzer.LinkLocalDetail) string {
	s := fmt.Sprintf("%s link-local payloads copied in the window", fmtCount(uint64(d.Payloads)))
	if d.PayloadsLost > 0 {
		s += fmt.Sprintf("; %s not recorded on this interface over the trace (rate cap or ring full): counts are of those copied", fmtCount(d.PayloadsLost))
	}
	return s
}

// linkLocalClientTitle names a client and how it was found.
func linkLocalClientTitle(c analyzer.LinkLocalClient) string {
	s := c.Client
	if c.Owner == nil {
		s += " (by address; no owner was found)"
	}
	return fmt.Sprintf("%s: %s link-local payloads", s, fmtCount(uint64(c.Payloads)))
}

// linkLocalClientRows is what one client asked.
func linkLocalClientRows(c analyzer.LinkLocalClient) [][2]string {
	var rows [][2]string
	add := func(k, v string) { rows = append(rows, [2]string{k, v}) }
	if d := c.DNS; d != nil {
		add("DNS queries", fmt.Sprintf("%s (%.0f/s), %s answered, %s unanswered, %s resent; answer latency p50 %s, max %s",
			fmtCount(uint64(d.Queries)), d.QueriesPerS, fmtCount(uint64(d.Answers)), fmtCount(uint64(d.Unanswered)),
			fmtCount(uint64(d.Resent)), fmtSeconds(d.LatencyP50S), fmtSeconds(d.LatencyMaxS)))
		add("DNS answers", fmt.Sprintf("NXDOMAIN %s of answers; rcodes %s; qtypes %s", fmtShare(d.NXDomainShare), countsText(d.RCodes), countsText(d.QTypes)))
		for _, x := range d.Expansions {
			add("search-path expansion", fmt.Sprintf("`%s` tried under %s (ndots:%d %s): %s queries of expanded names, %s NXDOMAIN, %s of the name itself",
				x.Base, strings.Join(x.Suffixes, ", "), x.NDots, ndotsHow(x.NDotsFrom), fmtCount(uint64(x.Queries)),
				fmtCount(uint64(x.NXDomain)), fmtCount(uint64(x.BaseQueries))))
		}
		if d.ExpansionShare > 0 {
			add("expansion share", fmtShare(d.ExpansionShare)+" of the queries asked a search-path expansion")
		}
		names := make([]string, 0, len(d.Names))
		for _, n := range d.Names {
			names = append(names, fmt.Sprintf("%s %s", n.Name, fmtCount(uint64(n.Queries))))
		}
		add("top names", strings.Join(names, ", "))
	}
	if d := c.IMDS; d != nil {
		add("IMDS requests", fmt.Sprintf("%s (%.1f/s): %s token requests, %s GETs with a token, %s without; %.2f token requests per GET",
			fmtCount(uint64(d.Requests)), d.RequestsPerS, fmtCount(uint64(d.TokenRequests)), fmtCount(uint64(d.GetsWithToken)),
			fmtCount(uint64(d.GetsWithoutToken)), d.TokensPerGet))
		if d.Retransmitted > 0 {
			add("IMDS retransmissions", fmt.Sprintf("%s request segments sent again (each request above is counted once)", fmtCount(uint64(d.Retransmitted))))
		}
		paths := make([]string, 0, len(d.Paths))
		for _, p := range d.Paths {
			paths = append(paths, fmt.Sprintf("%s %s (%.1f/s)", p.Path, fmtCount(uint64(p.Requests)), p.PerS))
		}
		add("IMDS paths", strings.Join(paths, ", "))
		if len(d.CredentialPaths) > 0 {
			add("credentials", strings.Join(d.CredentialPaths, ", "))
		}
	}
	if d := c.NTP; d != nil {
		add("NTP polls", fmt.Sprintf("%s (%.1f/s), advertised poll interval %s", fmtCount(uint64(d.Polls)), d.PollsPerS, fmtSeconds(d.PollIntervalS)))
	}
	return rows
}

func ndotsHow(from string) string {
	if from == "kubernetes_search_list" {
		return "implied: the Kubernetes search list, the kubelet's default"
	}
	return "at least: the name was tried under the suffixes first"
}

func countsText(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, fmtCount(uint64(m[k]))))
	}
	return strings.Join(parts, ", ")
}

// linkLocalHTMLClient is one offender's table in the HTML report.
type linkLocalHTMLClient struct {
	Title string
	Table htmlTable
}

func linkLocalHTMLClients(d *analyzer.LinkLocalDetail) []linkLocalHTMLClient {
	out := make([]linkLocalHTMLClient, 0, len(d.Clients))
	for _, c := range d.Clients {
		t := htmlTable{Header: []string{"asks", "detail"}}
		for _, r := range linkLocalClientRows(c) {
			t.Rows = append(t.Rows, []string{r[0], r[1]})
		}
		out = append(out, linkLocalHTMLClient{Title: linkLocalClientTitle(c), Table: t})
	}
	return out
}
