package analyzer

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/record"
)

// The link-local detail: what the offenders of a link-local finding asked,
// from the payloads the datapath copied (record.LinkLocalPayload), and the
// fixes that apply, ranked by the link-local packets each one removes.
//
// A client is its owner when attribution found one, else its address: a
// resolver opens a new socket per lookup, so one client is many flows.
//
// Search-path expansion: a resolver (glibc, musl, Go's) tries a name with
// fewer dots than ndots under each search suffix before the name itself.
// A queried name N = B + "." + S whose base B the same client also queried
// is an expansion of B under S; the suffixes of B in the order the
// resolver tries them (searchExpansions) are the search list. The expansion implies ndots > dots(B); a Kubernetes
// search list (<namespace>.svc.cluster.local first) implies the kubelet's
// ndots:5 unless a name with more dots was tried bare first.

// LinkLocalDetail is what the link-local offenders of a finding asked.
type LinkLocalDetail struct {
	// Clients, by link-local packets copied, most first (at most
	// linkLocalMaxClients).
	Clients []LinkLocalClient `json:"clients"`
	// Fixes that apply, ranked by the share of the copied link-local
	// packets each one addresses, most first.
	Fixes []LinkLocalFix `json:"fixes"`
	// Payloads is how many link-local payloads the detail rests on, and
	// PayloadsLost how many the datapath did not record on the interface
	// over the whole trace (its rate cap, or its ring full).
	Payloads     int    `json:"payloads"`
	PayloadsLost uint64 `json:"payloads_lost"`
	// FromOffsetS and ToOffsetS are the stretch the detail looked at: the
	// finding's, widened to a second at least.
	FromOffsetS float64 `json:"from_offset_s"`
	ToOffsetS   float64 `json:"to_offset_s"`
}

// LinkLocalFix is one fix and the share of the finding's copied link-local
// packets it addresses.
type LinkLocalFix struct {
	Kind  string  `json:"kind"` // search_path, dns_cache, imds_token, imds_cache, ntp_poll
	Share float64 `json:"share"`
	Text  string  `json:"text"`
}

// LinkLocalClient is one client's link-local asking.
type LinkLocalClient struct {
	Client   string        `json:"client"`
	Owner    *record.Owner `json:"owner,omitempty"`
	Payloads int           `json:"payloads"`
	DNS      *DNSDetail    `json:"dns,omitempty"`
	IMDS     *IMDSDetail   `json:"imds,omitempty"`
	NTP      *NTPDetail    `json:"ntp,omitempty"`
}

// DNSDetail is a client's DNS queries and their answers.
type DNSDetail struct {
	Queries     int     `json:"queries"`
	QueriesPerS float64 `json:"queries_per_s"`
	Answers     int     `json:"answers"`
	// Unanswered are queries no answer matched (by 5-tuple and id);
	// Resent are queries sent again (same 5-tuple, id and name).
	Unanswered int `json:"unanswered"`
	Resent     int `json:"resent"`
	NXDomain   int `json:"nxdomain"`
	// NXDomainShare is NXDomain of Answers.
	NXDomainShare float64        `json:"nxdomain_share"`
	LatencyP50S   float64        `json:"latency_p50_s"`
	LatencyMaxS   float64        `json:"latency_max_s"`
	Names         []NameCount    `json:"names"` // most asked first (at most linkLocalMaxNames)
	QTypes        map[string]int `json:"qtypes"`
	RCodes        map[string]int `json:"rcodes"`
	// Expansions are the base names tried under search suffixes, most
	// queries first; ExpansionShare is the share of Queries that asked an
	// expansion (a suffixed name, not the base itself).
	Expansions     []SearchExpansion `json:"expansions"`
	ExpansionShare float64           `json:"expansion_share"`
}

// NameCount is one queried name and its queries.
type NameCount struct {
	Name    string `json:"name"`
	Queries int    `json:"queries"`
}

// SearchExpansion is one base name tried under search suffixes.
type SearchExpansion struct {
	Base string `json:"base"`
	// Suffixes in the order the resolver tries them: its search list.
	Suffixes []string `json:"suffixes"`
	// Queries are those of the expanded names, BaseQueries those of the
	// base itself (each lookup's last try, after every suffix failed).
	Queries     int `json:"queries"`
	BaseQueries int `json:"base_queries"`
	// NXDomain are the answers NXDOMAIN to the expanded names.
	NXDomain int `json:"nxdomain"`
	// NDots is the ndots the expansion implies, NDotsFrom how:
	// "kubernetes_search_list" (the kubelet's default for a pod whose
	// search list it wrote) or "at_least" (the base has NDots-1 dots).
	NDots     int    `json:"ndots"`
	NDotsFrom string `json:"ndots_from"`
}

// IMDSDetail is a client's IMDS requests, each counted once: a request
// segment sent again (same connection, same TCP sequence number) is counted
// in Retransmitted only. The allowance counts every copy as a packet, and
// drops it copies: a request it drops is sent again until answered.
type IMDSDetail struct {
	Requests         int     `json:"requests"`
	Retransmitted    int     `json:"retransmitted"`
	RequestsPerS     float64 `json:"requests_per_s"`
	TokenRequests    int     `json:"token_requests"`
	GetsWithToken    int     `json:"gets_with_token"`
	GetsWithoutToken int     `json:"gets_without_token"`
	// TokensPerGet is token requests per GET: near 1, a new token for
	// every request (a token lives up to 6 hours).
	TokensPerGet float64    `json:"tokens_per_get"`
	Paths        []PathRate `json:"paths"` // most requested first (at most linkLocalMaxNames)
	// CredentialPaths are the requested paths under
	// /latest/meta-data/iam/security-credentials/.
	CredentialPaths []string `json:"credential_paths"`
}

// PathRate is one IMDS path and how often it was requested.
type PathRate struct {
	Path     string  `json:"path"`
	Requests int     `json:"requests"`
	PerS     float64 `json:"per_s"`
}

// NTPDetail is a client's NTP polls.
type NTPDetail struct {
	Polls     int     `json:"polls"` // client-mode packets sent
	PollsPerS float64 `json:"polls_per_s"`
	// PollIntervalS is the smallest poll interval the client's packets
	// advertised (2^poll seconds).
	PollIntervalS float64 `json:"poll_interval_s"`
}

const (
	linkLocalMaxClients = 5
	linkLocalMaxNames   = 10
	// kubernetesNDots is the kubelet's ndots for a pod's resolv.conf.
	kubernetesNDots = 5
	// credentialsPrefix is where IMDS serves the instance role's credentials.
	credentialsPrefix = "/latest/meta-data/iam/security-credentials/"
	// linkLocalDetailMin is the shortest stretch the detail looks at.
	linkLocalDetailMin = time.Second
	tokenPath          = "/latest/api/token"
)

// llClient gathers one client's payloads.
type llClient struct {
	name  string
	owner *record.Owner
	n     int
	dns   []dnsEvent
	imds  []record.LinkLocalPayload
	ntp   []record.LinkLocalPayload
}

type dnsEvent struct {
	p record.LinkLocalPayload
	m dnsMessage
}

// linkLocalDetail is the detail of the link-local packets on iface in
// [fromNs, toNs).
func (a *analysis) linkLocalDetail(iface string, fromNs, toNs int64) *LinkLocalDetail {
	clients := map[string]*llClient{}
	var order []string
	total := 0
	for _, p := range a.rec.LinkLocalPayloads {
		if p.Interface != iface || p.TimeNs < fromNs || p.TimeNs >= toNs {
			continue
		}
		key := p.Key // client -> service
		if countrules.ServiceOf(key.Src.Addr(), a.rec.Meta.VPCResolver) != record.ServiceNone {
			key = reverse(key) // an answer
		}
		var m dnsMessage
		if p.Service == record.ServiceDNS {
			var ok bool
			if m, ok = decodeDNS(p); !ok {
				continue
			}
		}
		name, owner := a.imdsClientName(iface, key)
		cl := clients[name]
		if cl == nil {
			cl = &llClient{name: name, owner: owner}
			clients[name] = cl
			order = append(order, name)
		}
		cl.n++
		total++
		switch p.Service {
		case record.ServiceDNS:
			cl.dns = append(cl.dns, dnsEvent{p, m})
		case record.ServiceIMDS:
			cl.imds = append(cl.imds, p)
		case record.ServiceNTP:
			cl.ntp = append(cl.ntp, p)
		}
	}
	if total == 0 {
		return nil
	}
	d := &LinkLocalDetail{Payloads: total, Fixes: []LinkLocalFix{}}
	for _, l := range a.rec.Loss {
		if l.Interface == iface {
			d.PayloadsLost += l.LinkLocalPayloads
		}
	}
	slices.SortStableFunc(order, func(x, y string) int { return cmp.Compare(clients[y].n, clients[x].n) })
	durS := max(float64(toNs-fromNs)/1e9, 1e-9)
	fixes := map[string]*LinkLocalFix{}
	addFix := func(kind string, packets int, text string) {
		f := fixes[kind]
		if f == nil {
			f = &LinkLocalFix{Kind: kind, Text: text}
			fixes[kind] = f
		}
		f.Share += float64(packets) / float64(total)
	}
	for i, name := range order {
		cl := clients[name]
		c := LinkLocalClient{Client: cl.name, Owner: cl.owner, Payloads: cl.n}
		if len(cl.dns) > 0 {
			c.DNS = dnsDetail(cl.dns, durS)
			dnsFixes(c.DNS, len(cl.dns), addFix)
		}
		if len(cl.imds) > 0 {
			c.IMDS = imdsDetail(cl.imds, durS)
			imdsFixes(c.IMDS, addFix)
		}
		if len(cl.ntp) > 0 {
			c.NTP = ntpDetail(cl.ntp, durS)
			if c.NTP.PollsPerS > 1.0/16 {
				addFix("ntp_poll", len(cl.ntp), fmt.Sprintf("NTP polled %.1f times a second by %s: poll no more often than every 16 s "+
					"(chrony's minpoll 4 against 169.254.169.123), and run one NTP client per host, not one per container", c.NTP.PollsPerS, cl.name))
			}
		}
		if i < linkLocalMaxClients {
			d.Clients = append(d.Clients, c)
		}
	}
	for _, f := range fixes {
		d.Fixes = append(d.Fixes, *f)
	}
	slices.SortStableFunc(d.Fixes, func(x, y LinkLocalFix) int {
		return cmp.Or(cmp.Compare(y.Share, x.Share), cmp.Compare(x.Kind, y.Kind))
	})
	return d
}

func dnsDetail(evs []dnsEvent, durS float64) *DNSDetail {
	d := &DNSDetail{QTypes: map[string]int{}, RCodes: map[string]int{}}
	type qkey struct {
		key record.FlowKey
		id  uint16
	}
	type query struct {
		name   string
		t      int64
		answer bool
	}
	queries := map[qkey]*query{}
	var latencies []float64
	names := map[string]int{}
	nxByName := map[string]int{}
	slices.SortStableFunc(evs, func(x, y dnsEvent) int { return cmp.Compare(x.p.TimeNs, y.p.TimeNs) })
	for _, e := range evs {
		if !e.m.response {
			d.Queries++
			names[e.m.name]++
			d.QTypes[e.m.qtype.String()]++
			k := qkey{e.p.Key, e.m.id}
			if q, ok := queries[k]; ok && q.name == e.m.name {
				d.Resent++
				continue
			}
			queries[k] = &query{name: e.m.name, t: e.p.TimeNs}
			continue
		}
		d.Answers++
		d.RCodes[e.m.rcode.String()]++
		if e.m.rcode == layers.DNSResponseCodeNXDomain {
			d.NXDomain++
			nxByName[e.m.name]++
		}
		if q, ok := queries[qkey{reverse(e.p.Key), e.m.id}]; ok && !q.answer {
			q.answer = true
			latencies = append(latencies, float64(e.p.TimeNs-q.t)/1e9)
		}
	}
	for _, q := range queries {
		if !q.answer {
			d.Unanswered++
		}
	}
	d.QueriesPerS = float64(d.Queries) / durS
	if d.Answers > 0 {
		d.NXDomainShare = float64(d.NXDomain) / float64(d.Answers)
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		d.LatencyP50S, d.LatencyMaxS = latencies[len(latencies)/2], latencies[len(latencies)-1]
	}
	d.Names = topNames(names)
	d.Expansions = searchExpansions(evs, names, nxByName)
	expanded := 0
	for _, x := range d.Expansions {
		expanded += x.Queries
	}
	if d.Queries > 0 {
		d.ExpansionShare = float64(expanded) / float64(d.Queries)
	}
	return d
}

func topNames(names map[string]int) []NameCount {
	out := make([]NameCount, 0, len(names))
	for n, c := range names {
		out = append(out, NameCount{n, c})
	}
	slices.SortFunc(out, func(x, y NameCount) int {
		return cmp.Or(cmp.Compare(y.Queries, x.Queries), cmp.Compare(x.Name, y.Name))
	})
	return out[:min(len(out), linkLocalMaxNames)]
}

// searchExpansions finds the base names queried under search suffixes.
func searchExpansions(evs []dnsEvent, names, nxByName map[string]int) []SearchExpansion {
	byBase := map[string]*SearchExpansion{}
	tried := map[string][2]string{} // a queried name -> its base and suffix ("" bare)
	for n := range names {
		labels := strings.Split(n, ".")
		// The longest queried base: a.b.c.svc.cluster.local is an expansion
		// of a.b.c rather than of a.b under c.svc.cluster.local... both are
		// queried only when the resolver tried a.b.c as a name.
		for k := len(labels) - 1; k >= 1; k-- {
			base := strings.Join(labels[:k], ".")
			if _, ok := names[base]; !ok {
				continue
			}
			suffix := strings.Join(labels[k:], ".")
			x := byBase[base]
			if x == nil {
				x = &SearchExpansion{Base: base, BaseQueries: names[base]}
				byBase[base] = x
			}
			tried[n], tried[base] = [2]string{base, suffix}, [2]string{base, ""}
			x.Suffixes = append(x.Suffixes, suffix)
			x.Queries += names[n]
			x.NXDomain += nxByName[n]
			break
		}
	}
	// How often each suffix (or the bare name) was tried right after
	// another, per base, and when each was first tried.
	type step struct{ base, from, to string }
	follows := map[step]int{}
	first := map[[2]string]int64{}
	last := map[string]string{}
	for _, e := range evs {
		bs, ok := tried[e.m.name]
		if e.m.response || !ok {
			continue
		}
		if _, ok := first[bs]; !ok {
			first[bs] = e.p.TimeNs
		}
		if prev, ok := last[bs[0]]; ok && prev != bs[1] {
			follows[step{bs[0], prev, bs[1]}]++
		}
		last[bs[0]] = bs[1]
	}
	out := []SearchExpansion{}
	for _, x := range byBase {
		// The search list in the order the resolver tries it: the first
		// suffix is the one most often tried after the bare name (which
		// ends a lookup, or begins it where the name has ndots dots or
		// more), each next the one most often tried after the one before,
		// the first tried settling ties. Not merely the first tried: a
		// stretch that begins inside a lookup sees its later suffixes
		// first (the lab's dns-search-path, one run in a dozen).
		rest := slices.Clone(x.Suffixes)
		slices.SortFunc(rest, func(s, t string) int {
			return cmp.Or(cmp.Compare(first[[2]string{x.Base, s}], first[[2]string{x.Base, t}]), cmp.Compare(s, t))
		})
		x.Suffixes = x.Suffixes[:0]
		for prev := ""; len(rest) > 0; {
			k := 0
			for i, s := range rest {
				if follows[step{x.Base, prev, s}] > follows[step{x.Base, prev, rest[k]}] {
					k = i
				}
			}
			prev = rest[k]
			x.Suffixes = append(x.Suffixes, prev)
			rest = slices.Delete(rest, k, k+1)
		}
		x.NDots, x.NDotsFrom = strings.Count(x.Base, ".")+1, "at_least"
		if strings.HasSuffix(x.Suffixes[0], ".svc.cluster.local") && x.NDots <= kubernetesNDots {
			x.NDots, x.NDotsFrom = kubernetesNDots, "kubernetes_search_list"
		}
		out = append(out, *x)
	}
	slices.SortFunc(out, func(x, y SearchExpansion) int {
		return cmp.Or(cmp.Compare(y.Queries, x.Queries), cmp.Compare(x.Base, y.Base))
	})
	return out[:min(len(out), linkLocalMaxNames)]
}

// dnsFixes ranks what removes a client's DNS packets: the expansions first
// (each lookup costs a query per suffix and type), then caching answers.
func dnsFixes(d *DNSDetail, packets int, add func(string, int, string)) {
	expanded := 0
	if len(d.Expansions) > 0 {
		x := d.Expansions[0]
		for _, e := range d.Expansions {
			expanded += e.Queries
		}
		// Queries and their answers: the packets an expansion costs.
		share := float64(expanded) / float64(max(d.Queries, 1))
		add("search_path", int(share*float64(packets)), fmt.Sprintf("%.0f%% of these queries are search-path expansions of `%s` "+
			"(ndots:%d implied; tried under %s, %.0f%% NXDOMAIN): use the fully qualified name with a trailing dot (`%s.`), "+
			"lower ndots (dnsConfig options ndots:1), or NodeLocal DNSCache",
			100*share, x.Base, x.NDots, strings.Join(x.Suffixes, ", "), 100*d.NXDomainShare, x.Base))
	}
	// The most asked name that is not an expansion: what a cache keeps.
	expansion := map[string]bool{}
	for _, x := range d.Expansions {
		for _, s := range x.Suffixes {
			expansion[x.Base+"."+s] = true
		}
	}
	rest := packets - int(float64(expanded)/float64(max(d.Queries, 1))*float64(packets))
	for _, n := range d.Names {
		if rest > 0 && !expansion[n.Name] {
			add("dns_cache", rest, fmt.Sprintf("cache DNS answers (NodeLocal DNSCache, or a caching resolver on the host): "+
				"%.0f queries/s, the most asked `%s` (%d queries)", d.QueriesPerS, n.Name, n.Queries))
			break
		}
	}
}

func imdsFixes(d *IMDSDetail, add func(string, int, string)) {
	gets := d.GetsWithToken + d.GetsWithoutToken
	if d.TokenRequests > 0 && d.TokensPerGet >= 0.5 {
		add("imds_token", 2*d.TokenRequests, fmt.Sprintf("a new IMDSv2 token for every request (%d token requests for %d GETs): "+
			"reuse it for its TTL; cache credentials (every AWS SDK does by default)", d.TokenRequests, gets))
	}
	if n := gets; n > 0 {
		what := "metadata"
		if len(d.CredentialPaths) > 0 {
			what = "credentials (" + d.CredentialPaths[0] + ")"
		}
		add("imds_cache", n, fmt.Sprintf("read IMDS once and cache: %s requested %.1f times a second", what, d.RequestsPerS))
	}
}

func imdsDetail(ps []record.LinkLocalPayload, durS float64) *IMDSDetail {
	d := &IMDSDetail{Paths: []PathRate{}}
	paths := map[string]int{}
	creds := map[string]bool{}
	type segment struct {
		key record.FlowKey
		seq uint32
	}
	sent := map[segment]bool{}
	for _, p := range ps {
		if p.TCPSeq != 0 {
			s := segment{p.Key, p.TCPSeq}
			if sent[s] {
				d.Retransmitted++
				continue
			}
			sent[s] = true
		}
		d.Requests++
		switch p.IMDSKind {
		case record.IMDSTokenRequest:
			d.TokenRequests++
		case record.IMDSGetToken:
			d.GetsWithToken++
		case record.IMDSGetNoToken:
			d.GetsWithoutToken++
		}
		path := imdsPath(p.Data)
		paths[path]++
		if strings.HasPrefix(path, credentialsPrefix) {
			creds[path] = true
		}
	}
	d.RequestsPerS = float64(d.Requests) / durS
	if gets := d.GetsWithToken + d.GetsWithoutToken; gets > 0 {
		d.TokensPerGet = float64(d.TokenRequests) / float64(gets)
	}
	for _, nc := range topNames(paths) {
		d.Paths = append(d.Paths, PathRate{Path: nc.Name, Requests: nc.Queries, PerS: float64(nc.Queries) / durS})
	}
	d.CredentialPaths = append([]string{}, slices.Sorted(maps.Keys(creds))...)
	return d
}

// imdsPath is the path of an HTTP request line ("GET /latest/... HTTP/1.1"),
// without its query; "?" when the copy holds none.
func imdsPath(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\r\n")
	_, rest, ok := strings.Cut(line, " ")
	if !ok {
		return "?"
	}
	path, _, _ := strings.Cut(rest, " ")
	path, _, _ = strings.Cut(path, "?")
	if !strings.HasPrefix(path, "/") {
		return "?"
	}
	return path
}

func ntpDetail(ps []record.LinkLocalPayload, durS float64) *NTPDetail {
	d := &NTPDetail{}
	for _, p := range ps {
		if len(p.Data) < 3 || p.Data[0]&7 != 3 { // mode 3: client
			continue
		}
		d.Polls++
		iv := 1.0
		for e := int8(p.Data[2]); e > 0 && iv < 1<<17; e-- {
			iv *= 2
		}
		if d.PollIntervalS == 0 || iv < d.PollIntervalS {
			d.PollIntervalS = iv
		}
	}
	d.PollsPerS = float64(d.Polls) / durS
	return d
}

// attachLinkLocalDetail hangs the detail on a link-local finding: the fix
// ranked first leads the recommendation, and the summary says what the
// first client asks.
//
// An incident can be a few milliseconds of drops: the detail looks at
// least linkLocalDetailMin around it, so that its rates are the client's
// and not those of one burst.
func (a *analysis) attachLinkLocalDetail(f *Finding, fromNs, toNs int64) {
	if short := int64(linkLocalDetailMin) - (toNs - fromNs); short > 0 {
		fromNs, toNs = fromNs-short/2, toNs+short-short/2
	}
	d := a.linkLocalDetail(f.Interface, fromNs, toNs)
	if d == nil {
		return
	}
	d.FromOffsetS, d.ToOffsetS = a.offsetS(fromNs), a.offsetS(toNs)
	f.LinkLocal = d
	if len(d.Fixes) > 0 {
		texts := make([]string, len(d.Fixes))
		for i, x := range d.Fixes {
			texts[i] = x.Text
		}
		f.Recommendation = strings.Join(texts, "; ") + ". " + f.Recommendation
		f.Summary += "; " + d.Fixes[0].Text
	}
}
