package report

import (
	stdhtml "html"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// imdsInput is a trace of a container whose IMDSv2 token replies die one
// hop short: two token requests answered with TTL 1 and time exceeded,
// then a GET without a token.
func imdsInput(t *testing.T) Input {
	t.Helper()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const s = int64(time.Second)
	rec := &record.Recording{Meta: record.Meta{WindowNs: 1_000_000,
		Interfaces: []record.InterfaceInfo{{Name: "eth0", Driver: "ena"}},
		Start:      record.ClockPair{MonoNs: s, Wall: start}, End: record.ClockPair{MonoNs: 5 * s, Wall: start.Add(4 * time.Second)}}}
	imds := netip.MustParseAddrPort("169.254.169.254:80")
	add := func(port uint16, kind record.IMDSKind, at int64, ttl uint8, exceeded bool) {
		k := record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.5"), port), Dst: imds}
		back := record.FlowKey{Proto: 6, Src: k.Dst, Dst: k.Src}
		rec.IMDS = append(rec.IMDS, record.IMDSEvent{Interface: "eth0", Direction: record.Egress, TimeNs: at, Kind: kind, Key: k, TTL: 64},
			record.IMDSEvent{Interface: "eth0", Direction: record.Ingress, TimeNs: at + 1e6, Kind: record.IMDSReply, Key: back, TTL: ttl})
		if exceeded {
			rec.IMDS = append(rec.IMDS, record.IMDSEvent{Interface: "eth0", Direction: record.Egress, TimeNs: at + 2e6, Kind: record.IMDSTimeExceeded, Key: back, TTL: ttl})
		}
		rec.Owners = append(rec.Owners, record.FlowOwner{Interface: "eth0", Key: k, Owner: record.Owner{Cgroup: "/lab/imds-client", How: "veth"}})
	}
	add(41000, record.IMDSTokenRequest, 2*s, 1, true)
	add(41002, record.IMDSTokenRequest, 3*s, 1, true)
	add(41004, record.IMDSGetNoToken, 3*s+s/4, 64, false)
	return Input{Result: analyzer.Analyze(rec, analyzer.DefaultOptions()), Recording: rec, Env: record.EnvironmentOf(rec)}
}

// TestIMDSFindingRenders: text, HTML and JSON show the client, its
// requests with their TTLs and time exceeded, and the fix.
func TestIMDSFindingRenders(t *testing.T) {
	in := imdsInput(t)
	text := renderText(t, in)
	page := stdhtml.UnescapeString(string(renderHTML(t, in)))
	for _, want := range []string{"imds_hop_limit", "cgroup /lab/imds-client", "found by veth", "token_request tcp 10.0.0.5:41000 -> 169.254.169.254:80: reply TTL 1", "moves no allowance counter",
		"get_without_token", "--http-put-response-hop-limit 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	checkWidth(t, text)
	js := validJSON(t, in.Result)
	if !strings.Contains(js, `"client": "cgroup /lab/imds-client"`) || !strings.Contains(js, `"reply_ttl": 1`) {
		t.Errorf("json lacks the client or the ttl")
	}
}
