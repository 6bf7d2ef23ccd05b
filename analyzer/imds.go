package analyzer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/enaprobe/enaprobe/internal/record"
)

// The IMDS hop-limit rule, from the IMDS packets the datapath recognised
// (record.IMDSEvent), never from one SDK's timing:
//
//   - a token request's reply (the first reply on its connection after it)
//     arrived with TTL (hop limit) 1;
//   - the client sits behind a forwarding hop: the host sent ICMP time
//     exceeded toward IMDS quoting a reply of that connection (it could not
//     forward it), or the client's owner was found by its veth;
//   - and the client then made another token request or a GET without a
//     token (the IMDSv1 fallback).
//
// A client is its owner when attribution found one, else the source
// address of its requests (NATed containers share the host's).

// imdsMaxRequests bounds the requests listed per client.
const imdsMaxRequests = 20

// imdsTTLDead is the TTL of a reply that dies at the next forwarding hop.
const imdsTTLDead = 1

// imdsConn is one TCP connection to IMDS as the trace saw it: its requests
// in order, and the replies and time exceeded that came back on it.
type imdsConn struct {
	key      record.FlowKey // client -> IMDS
	requests []record.IMDSEvent
	replies  []record.IMDSEvent
	exceeded []record.IMDSEvent
}

// imdsClient gathers one client's connections on one interface.
type imdsClient struct {
	iface string
	name  string
	owner *record.Owner
	conns []*imdsConn
}

// imdsRequestFate is a request with what became of it.
type imdsRequestFate struct {
	ev       record.IMDSEvent
	replyTTL int // 0: no reply seen
	exceeded bool
}

func (a *analysis) imdsFindings() []Finding {
	if len(a.rec.IMDS) == 0 {
		return nil
	}
	type connRef struct {
		iface string
		key   record.FlowKey
	}
	conns := map[connRef]*imdsConn{}
	var order []connRef
	conn := func(iface string, k record.FlowKey) *imdsConn {
		r := connRef{iface, k}
		c, ok := conns[r]
		if !ok {
			c = &imdsConn{key: k}
			conns[r] = c
			order = append(order, r)
		}
		return c
	}
	evs := slices.Clone(a.rec.IMDS)
	slices.SortStableFunc(evs, func(x, y record.IMDSEvent) int { return cmp.Compare(x.TimeNs, y.TimeNs) })
	for _, e := range evs {
		switch e.Kind {
		case record.IMDSTokenRequest, record.IMDSGetNoToken, record.IMDSGetToken:
			c := conn(e.Interface, e.Key)
			c.requests = append(c.requests, e)
		case record.IMDSReply:
			c := conn(e.Interface, reverse(e.Key))
			c.replies = append(c.replies, e)
		case record.IMDSTimeExceeded:
			// The quoted packet is a reply: IMDS -> client.
			c := conn(e.Interface, reverse(e.Key))
			c.exceeded = append(c.exceeded, e)
		}
	}

	clients := map[string]*imdsClient{}
	var names []string
	for _, r := range order {
		c := conns[r]
		if len(c.requests) == 0 {
			continue
		}
		name, owner := a.imdsClientName(r.iface, c.key)
		id := r.iface + "\x00" + name
		cl, ok := clients[id]
		if !ok {
			cl = &imdsClient{iface: r.iface, name: name, owner: owner}
			clients[id] = cl
			names = append(names, id)
		}
		cl.conns = append(cl.conns, c)
	}
	var out []Finding
	for _, id := range names {
		if f, ok := a.imdsClientFinding(clients[id]); ok {
			out = append(out, f)
		}
	}
	return out
}

// imdsClientName names the client of a connection: by its owner when one
// was found, else by its source address.
func (a *analysis) imdsClientName(iface string, k record.FlowKey) (string, *record.Owner) {
	o := a.owners.of(flowRef{iface, k})
	if o == nil {
		return k.Src.Addr().String(), nil
	}
	return ownerGroup(o), o
}

func reverse(k record.FlowKey) record.FlowKey {
	return record.FlowKey{Proto: k.Proto, Src: k.Dst, Dst: k.Src}
}

// fates pairs each request of a connection with the first reply after it
// (before the next request) and the time exceeded that quote that reply.
func (c *imdsConn) fates() []imdsRequestFate {
	out := make([]imdsRequestFate, len(c.requests))
	for i, rq := range c.requests {
		out[i].ev = rq
		until := int64(1<<63 - 1)
		if i+1 < len(c.requests) {
			until = c.requests[i+1].TimeNs
		}
		for _, rp := range c.replies {
			if rp.TimeNs >= rq.TimeNs && rp.TimeNs < until {
				out[i].replyTTL = int(rp.TTL)
				break
			}
		}
		for _, x := range c.exceeded {
			if x.TimeNs >= rq.TimeNs && x.TimeNs < until {
				out[i].exceeded = true
				break
			}
		}
	}
	return out
}

func (a *analysis) imdsClientFinding(cl *imdsClient) (Finding, bool) {
	var all []imdsRequestFate
	var exceeded int
	for _, c := range cl.conns {
		all = append(all, c.fates()...)
		exceeded += len(c.exceeded)
	}
	slices.SortStableFunc(all, func(x, y imdsRequestFate) int { return cmp.Compare(x.ev.TimeNs, y.ev.TimeNs) })
	viaVeth := cl.owner != nil && cl.owner.How == "veth"

	// The first token request whose reply arrived with TTL 1 and died on
	// its way to a forwarded client.
	first := -1
	for i, f := range all {
		if f.ev.Kind == record.IMDSTokenRequest && f.replyTTL == imdsTTLDead && (f.exceeded || viaVeth) {
			first = i
			break
		}
	}
	if first < 0 {
		return Finding{}, false
	}
	var tokens, deadReplies, getsNoToken, getsToken, retries int
	minTTL := 0
	for i, f := range all {
		switch f.ev.Kind {
		case record.IMDSTokenRequest:
			tokens++
			if i > first {
				retries++
			}
		case record.IMDSGetNoToken:
			getsNoToken++
		case record.IMDSGetToken:
			getsToken++
		}
		if f.ev.Kind == record.IMDSTokenRequest && f.replyTTL > 0 {
			if f.replyTTL == imdsTTLDead {
				deadReplies++
			}
			if minTTL == 0 || f.replyTTL < minTTL {
				minTTL = f.replyTTL
			}
		}
	}
	fallback := 0
	for _, f := range all[first+1:] {
		if f.ev.Kind == record.IMDSTokenRequest || f.ev.Kind == record.IMDSGetNoToken {
			fallback++
		}
	}
	if fallback == 0 {
		return Finding{}, false // no retry seen: nothing says the client missed its token
	}
	// The delay: from each token request that got no usable reply to the
	// client's next request.
	var waitedNs int64
	rows := []IMDSRequest{}
	for i, f := range all {
		r := IMDSRequest{OffsetS: a.offsetS(f.ev.TimeNs), Kind: f.ev.Kind.String(), Flow: f.ev.Key.String(),
			ReplyTTL: f.replyTTL, TimeExceeded: f.exceeded}
		died := f.replyTTL == 0 || f.exceeded || (viaVeth && f.replyTTL == imdsTTLDead)
		if f.ev.Kind == record.IMDSTokenRequest && died && i+1 < len(all) {
			w := all[i+1].ev.TimeNs - f.ev.TimeNs
			waitedNs += w
			r.WaitedS = float64(w) / 1e9
		}
		if len(rows) < imdsMaxRequests {
			rows = append(rows, r)
		}
	}
	startNs := all[first].ev.TimeNs
	endNs := all[len(all)-1].ev.TimeNs
	f := a.newFindingNs(KindIMDSHopLimit, SeverityWarning, cl.iface, startNs, endNs)
	f.FlowsRankedBy = rankPackets
	f.Flows = a.imdsFlows(cl)
	f.IMDS = &IMDSDiagnosis{Client: cl.name, Owner: cl.owner, TokenRequests: tokens, TokenRepliesTTL1: deadReplies,
		ReplyTTL: minTTL, TimeExceeded: exceeded, GetsWithoutToken: getsNoToken, GetsWithToken: getsToken,
		WaitedS: float64(waitedNs) / 1e9, Requests: rows, RequestsTotal: len(all)}
	f.Evidence = append(f.Evidence,
		ev("token_requests", float64(tokens), "count"),
		ev("token_replies_ttl_1", float64(deadReplies), "count"),
		ev("reply_ttl", float64(minTTL), "hops"),
		ev("time_exceeded_toward_imds", float64(exceeded), "count"),
		ev("token_retries", float64(retries), "count"),
		ev("gets_without_token", float64(getsNoToken), "count"),
		ev("client_waited", float64(waitedNs)/1e9, "s"))
	behind := "the host sent ICMP time exceeded back toward IMDS"
	if exceeded == 0 {
		behind = "its owner was found by its veth"
	}
	var then []string
	if retries > 0 {
		then = append(then, fmt.Sprintf("%d token request(s) more", retries))
	}
	if getsNoToken > 0 {
		then = append(then, fmt.Sprintf("%d GET(s) without a token (IMDSv1 fallback)", getsNoToken))
	}
	f.Summary = fmt.Sprintf("IMDSv2 token replies die one hop short of %s: %d of its %d token request(s) got a reply that "+
		"left IMDS with TTL %d and %s (the client sits behind a forwarding hop: a container or pod); it then made %s "+
		"and waited %.2f s for tokens that never came", cl.name, deadReplies, tokens, imdsTTLDead, behind,
		strings.Join(then, " and "), float64(waitedNs)/1e9)
	f.Recommendation = "Raise the instance's IMDSv2 PUT response hop limit to 2, so the token reply survives the hop into the " +
		"container: aws ec2 modify-instance-metadata-options --instance-id <instance-id> --http-put-response-hop-limit 2 " +
		"--http-endpoint enabled (launch templates: MetadataOptions.HttpPutResponseHopLimit = 2). Or keep the hop limit " +
		"at 1, which keeps containers away from the instance's credentials, and give the workload its own: IAM roles " +
		"for service accounts (IRSA) or EKS Pod Identity."
	return f, true
}

// imdsFlows are the client's connections to IMDS with their packets, as
// the flow snapshots have them.
func (a *analysis) imdsFlows(cl *imdsClient) []FlowShare {
	var tallies []flowTally
	for _, c := range cl.conns {
		ref := flowRef{cl.iface, c.key}
		i, ok := a.flows.ids[ref]
		if !ok {
			continue
		}
		fi := a.flows.flows[i]
		tallies = append(tallies, flowTally{ref: ref, bytes: fi.last.Bytes, packets: fi.last.Packets, stats: fi.last, source: "snapshots"})
	}
	var total float64
	for _, t := range tallies {
		total += float64(t.packets)
	}
	return a.flowShares(tallies, rankPackets, total)
}
