package analyzer

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// imdsRec is a recording of IMDS events only, on eth0, from t=1 s to 10 s.
type imdsRec struct {
	rec *record.Recording
}

func newIMDSRec() *imdsRec {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const s = int64(time.Second)
	return &imdsRec{rec: &record.Recording{Meta: record.Meta{
		WindowNs:   1_000_000,
		Interfaces: []record.InterfaceInfo{{Name: "eth0", Driver: "ena"}},
		Start:      record.ClockPair{MonoNs: s, Wall: start},
		End:        record.ClockPair{MonoNs: 10 * s, Wall: start.Add(9 * time.Second)},
	}}}
}

var imdsAP = netip.MustParseAddrPort("169.254.169.254:80")

// exchange adds a request from src at atMs (ms after the start of the
// trace) and, when ttl > 0, its reply 1 ms later with that TTL, and, when
// exceeded, the time exceeded the host sent about the reply.
func (r *imdsRec) exchange(src string, kind record.IMDSKind, atMs int64, ttl uint8, exceeded bool) {
	k := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort(src), Dst: imdsAP}
	at := r.rec.Meta.Start.MonoNs + atMs*int64(time.Millisecond)
	r.rec.IMDS = append(r.rec.IMDS, record.IMDSEvent{Interface: "eth0", Direction: record.Egress, TimeNs: at, Kind: kind, Key: k, TTL: 64})
	back := record.FlowKey{Proto: 6, Src: k.Dst, Dst: k.Src}
	if ttl > 0 {
		r.rec.IMDS = append(r.rec.IMDS, record.IMDSEvent{Interface: "eth0", Direction: record.Ingress, TimeNs: at + 1e6, Kind: record.IMDSReply, Key: back, TTL: ttl})
	}
	if exceeded {
		r.rec.IMDS = append(r.rec.IMDS, record.IMDSEvent{Interface: "eth0", Direction: record.Egress, TimeNs: at + 1e6 + 5e4, Kind: record.IMDSTimeExceeded, Key: back, TTL: ttl})
	}
}

func imdsFindingsOf(t *testing.T, rec *record.Recording) []Finding {
	t.Helper()
	if err := record.Validate(rec); err != nil {
		t.Fatal(err)
	}
	var out []Finding
	for _, f := range Analyze(rec, DefaultOptions()).Findings {
		if f.Kind == KindIMDSHopLimit {
			out = append(out, f)
		}
	}
	return out
}

// TestIMDSHopLimit: a NATed client (the host's address) whose token replies
// arrive with TTL 1 and are answered with time exceeded, retrying once and
// then falling back to IMDSv1, is named with its requests, TTLs, time
// exceeded and the time it waited.
func TestIMDSHopLimit(t *testing.T) {
	r := newIMDSRec()
	r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 100, 1, true)
	r.exchange("10.0.0.5:41002", record.IMDSTokenRequest, 1100, 1, true)
	r.exchange("10.0.0.5:41004", record.IMDSGetNoToken, 1350, 64, false)
	r.exchange("10.0.0.5:41004", record.IMDSGetNoToken, 1360, 64, false)
	// A local process on the same host whose token gets through.
	r.exchange("10.0.0.5:42000", record.IMDSTokenRequest, 3000, 1, false)
	r.exchange("10.0.0.5:42000", record.IMDSGetToken, 3010, 64, false)
	got := imdsFindingsOf(t, r.rec)
	if len(got) != 1 {
		t.Fatalf("got %d imds_hop_limit findings, want 1: %+v", len(got), got)
	}
	f := got[0]
	d := f.IMDS
	if d == nil || d.Client != "10.0.0.5" || d.TokenRequests != 3 || d.TokenRepliesTTL1 != 3 || d.ReplyTTL != 1 ||
		d.TimeExceeded != 2 || d.GetsWithoutToken != 2 || d.GetsWithToken != 1 || d.RequestsTotal != 6 {
		t.Fatalf("diagnosis: %+v", d)
	}
	// Waited: 1.0 s after the first token request, 0.25 s after the second.
	if d.WaitedS < 1.249 || d.WaitedS > 1.251 {
		t.Errorf("waited %.3f s, want 1.25", d.WaitedS)
	}
	if f.StartOffsetS != 0.1 || f.Interface != "eth0" || f.Severity != SeverityWarning {
		t.Errorf("finding at %.3f s on %s, %s", f.StartOffsetS, f.Interface, f.Severity)
	}
	for _, want := range []string{"--http-put-response-hop-limit 2", "--http-endpoint enabled", "IRSA", "Pod Identity"} {
		if !strings.Contains(f.Recommendation, want) {
			t.Errorf("recommendation lacks %q: %s", want, f.Recommendation)
		}
	}
	if !strings.Contains(f.Summary, "10.0.0.5") || !strings.Contains(f.Summary, "TTL 1") {
		t.Errorf("summary: %s", f.Summary)
	}
	if d.Requests[0].ReplyTTL != 1 || !d.Requests[0].TimeExceeded || d.Requests[0].WaitedS != 1 {
		t.Errorf("first request: %+v", d.Requests[0])
	}
}

// TestIMDSNoHopLimitFinding: no finding when the token replies get through:
// hop limit 2, or TTL 1 to a client on the host (no time exceeded), or a
// TTL-1 reply to a forwarded client that never asked again.
func TestIMDSNoHopLimitFinding(t *testing.T) {
	for name, fill := range map[string]func(r *imdsRec){
		"hop limit 2": func(r *imdsRec) {
			r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 100, 2, false)
			r.exchange("10.0.0.5:41000", record.IMDSGetToken, 110, 64, false)
		},
		"local client, ttl 1": func(r *imdsRec) {
			r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 100, 1, false)
			r.exchange("10.0.0.5:41000", record.IMDSGetToken, 110, 64, false)
			r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 2000, 1, false)
		},
		"no retry": func(r *imdsRec) {
			r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 100, 1, true)
		},
		"imdsv1 only": func(r *imdsRec) {
			r.exchange("10.0.0.5:41000", record.IMDSGetNoToken, 100, 64, false)
			r.exchange("10.0.0.5:41000", record.IMDSGetNoToken, 200, 64, false)
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := newIMDSRec()
			fill(r)
			if got := imdsFindingsOf(t, r.rec); len(got) != 0 {
				t.Errorf("got %+v", got[0])
			}
		})
	}
}

// TestIMDSHopLimitNamesOwner: with attribution, the client is its owner,
// one finding per owner, and an owner found by its veth is behind a
// forwarding hop even when no time exceeded was seen.
func TestIMDSHopLimitNamesOwner(t *testing.T) {
	r := newIMDSRec()
	r.exchange("10.0.0.5:41000", record.IMDSTokenRequest, 100, 1, false)
	r.exchange("10.0.0.5:41002", record.IMDSGetNoToken, 400, 64, false)
	r.exchange("10.0.0.5:43000", record.IMDSTokenRequest, 500, 1, true)
	r.exchange("10.0.0.5:43002", record.IMDSTokenRequest, 1500, 1, true)
	own := func(port uint16, o record.Owner) {
		r.rec.Owners = append(r.rec.Owners, record.FlowOwner{Interface: "eth0",
			Key: record.FlowKey{Proto: 6, Src: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.5"), port), Dst: imdsAP}, Owner: o})
	}
	a := record.Owner{Cgroup: "/lab/app-a", How: "veth"}
	b := record.Owner{Pod: "payments/api-7d9", Cgroup: "/kubepods/pod1", How: "veth"}
	own(41000, a)
	own(41002, a)
	own(43000, b)
	own(43002, b)
	got := imdsFindingsOf(t, r.rec)
	if len(got) != 2 {
		t.Fatalf("got %d findings, want 2", len(got))
	}
	names := map[string]*IMDSDiagnosis{}
	for _, f := range got {
		names[f.IMDS.Client] = f.IMDS
	}
	if d := names["cgroup /lab/app-a"]; d == nil || d.Owner == nil || d.Owner.Cgroup != "/lab/app-a" || d.TimeExceeded != 0 || d.GetsWithoutToken != 1 {
		t.Errorf("app-a: %+v", d)
	}
	if d := names["pod payments/api-7d9"]; d == nil || d.TokenRequests != 2 || d.TimeExceeded != 2 {
		t.Errorf("pod: %+v", d)
	}
}
