package report

import (
	"bytes"
	"compress/gzip"
	stdhtml "html"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/limits"
	"github.com/enaprobe/enaprobe/internal/record"
)

// linkLocalInput is the linklocal_exceeded recording with its DNS storm's
// payloads: a client resolving api.heldout-shop.example through a pod's
// search list, every suffixed name NXDOMAIN.
func linkLocalInput(t *testing.T) Input {
	t.Helper()
	rec, err := record.ReadFile(filepath.Join(recordingsDir, "linklocal_exceeded.rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddr("10.0.3.9")
	now := rec.Meta.Start.MonoNs + int64(4.3e9)
	search := []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "ec2.internal", ""}
	for l := range 50 {
		key := record.FlowKey{Proto: 17, Src: netip.AddrPortFrom(client, uint16(30000+l)), Dst: netip.AddrPortFrom(limits.DNSv4, 53)}
		back := record.FlowKey{Proto: 17, Src: key.Dst, Dst: key.Src}
		for i, s := range search {
			name := "api.heldout-shop.example"
			rc := layers.DNSResponseCodeNoErr
			if s != "" {
				name, rc = name+"."+s, layers.DNSResponseCodeNXDomain
			}
			id := uint16(l*8 + i)
			q := []layers.DNSQuestion{{Name: []byte(name), Type: layers.DNSTypeA, Class: layers.DNSClassIN}}
			for _, m := range []struct {
				d   *layers.DNS
				dir record.Direction
				k   record.FlowKey
			}{{&layers.DNS{ID: id, Questions: q}, record.Egress, key}, {&layers.DNS{ID: id, QR: true, ResponseCode: rc, Questions: q}, record.Ingress, back}} {
				buf := gopacket.NewSerializeBuffer()
				if err := m.d.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
					t.Fatal(err)
				}
				b := append([]byte(nil), buf.Bytes()...)
				rec.LinkLocalPayloads = append(rec.LinkLocalPayloads, record.LinkLocalPayload{Interface: "eth0", Direction: m.dir,
					TimeNs: now, Service: record.ServiceDNS, Key: m.k, Len: uint16(len(b)), Data: b})
				now += 500_000
			}
		}
	}
	return Input{Result: analyzer.Analyze(rec, analyzer.DefaultOptions()), Recording: rec, Env: record.EnvironmentOf(rec)}
}

// TestLinkLocalDetailRenders: text, HTML (a table per offender) and JSON
// show the base name, the expansion, the NXDOMAIN share and the fix first.
func TestLinkLocalDetailRenders(t *testing.T) {
	in := linkLocalInput(t)
	wrapped := renderText(t, in)
	text := strings.Join(strings.Fields(wrapped), " ") // the text report wraps
	page := strings.Join(strings.Fields(stdhtml.UnescapeString(string(renderHTML(t, in)))), " ")
	for _, want := range []string{"1. 80% of these queries are search-path expansions of `api.heldout-shop.example` (ndots:5 implied",
		"trailing dot", "NodeLocal DNSCache", "NXDOMAIN 80.0% of answers",
		"`api.heldout-shop.example` tried under default.svc.cluster.local, svc.cluster.local, cluster.local, ec2.internal",
		"10.0.3.9 (by address; no owner was found)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	if !strings.Contains(page, "<th>asks</th>") {
		t.Error("html has no table for the offender")
	}
	checkWidth(t, wrapped)
	js := validJSON(t, in.Result)
	if !strings.Contains(js, `"base": "api.heldout-shop.example"`) || !strings.Contains(js, `"kind": "search_path"`) {
		t.Error("json lacks the expansion or the fix")
	}
}

// TestRedactLinkLocalNames writes a redacted bundle of a trace whose DNS
// payloads ask api.heldout-shop.example through a pod's search list, with
// an answer address and an IMDS credentials request: no label of those
// names but the public and cluster suffixes is left in any file or payload,
// no answer address outside link-local either, and the redacted recording
// still shows the expansion, of the pseudonym.
func TestRedactLinkLocalNames(t *testing.T) {
	in := linkLocalInput(t)
	rec := *in.Recording
	rec.LinkLocalPayloads = slices.Clone(rec.LinkLocalPayloads)
	at := rec.LinkLocalPayloads[len(rec.LinkLocalPayloads)-1].TimeNs
	key := record.FlowKey{Proto: 17, Src: netip.AddrPortFrom(limits.DNSv4, 53), Dst: netip.MustParseAddrPort("10.0.3.9:31000")}
	q := []layers.DNSQuestion{{Name: []byte("api.heldout-shop.example"), Type: layers.DNSTypeA, Class: layers.DNSClassIN}}
	buf := gopacket.NewSerializeBuffer()
	if err := (&layers.DNS{ID: 1, QR: true, Questions: q, Answers: []layers.DNSResourceRecord{
		{Name: q[0].Name, Type: layers.DNSTypeA, Class: layers.DNSClassIN, TTL: 30, IP: []byte{203, 0, 113, 7}},
		{Name: q[0].Name, Type: layers.DNSTypeA, Class: layers.DNSClassIN, TTL: 30, IP: []byte{169, 254, 20, 10}}}}).SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		t.Fatal(err)
	}
	get := "GET /latest/meta-data/iam/security-credentials/heldout-shop-role HTTP/1.1"
	rec.LinkLocalPayloads = append(rec.LinkLocalPayloads,
		record.LinkLocalPayload{Interface: "eth0", Direction: record.Ingress, TimeNs: at + 1, Service: record.ServiceDNS, Key: key,
			Len: uint16(len(buf.Bytes())), Data: slices.Clone(buf.Bytes())},
		record.LinkLocalPayload{Interface: "eth0", Direction: record.Egress, TimeNs: at + 2, Service: record.ServiceIMDS,
			Key: record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.3.9:41000"), Dst: netip.AddrPortFrom(limits.IMDSv4, 80)},
			Len: uint16(len(get)), IMDSKind: record.IMDSGetToken, Data: []byte(get)})
	in.Recording = &rec
	in.Result = analyzer.Analyze(&rec, analyzer.DefaultOptions())

	red := Redact(in)
	p := filepath.Join(t.TempDir(), "ticket.tar.gz")
	if err := WriteBundle(p, red); err != nil {
		t.Fatal(err)
	}
	files := bundleContents(t, p)
	zr, err := gzip.NewReader(bytes.NewReader(files[record.BundleRecording]))
	if err != nil {
		t.Fatal(err)
	}
	if files["recording.json"], err = io.ReadAll(zr); err != nil {
		t.Fatal(err)
	}
	delete(files, record.BundleRecording)
	secrets := []string{"heldout-shop", "api.", ".default.", "203.0.113.7"}
	for name, data := range files {
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds %q", name, s)
			}
		}
	}
	back, _, err := record.ReadBundle(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.LinkLocalPayloads) != len(rec.LinkLocalPayloads) {
		t.Fatalf("%d payloads in the redacted bundle, want %d", len(back.LinkLocalPayloads), len(rec.LinkLocalPayloads))
	}
	kept := map[string]bool{"example": true, "svc": true, "cluster": true, "local": true, "ec2": true, "internal": true}
	pseudo := regexp.MustCompile(`^l[0-9a-f]{8}$`)
	sawLinkLocalAnswer := false
	for _, pl := range back.LinkLocalPayloads {
		for _, s := range secrets {
			if bytes.Contains(pl.Data, []byte(s)) {
				t.Errorf("payload %q holds %q", pl.Data, s)
			}
		}
		if pl.Service != record.ServiceDNS {
			continue
		}
		var d layers.DNS
		if err := d.DecodeFromBytes(pl.Data, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("redacted payload does not decode: %v", err)
		}
		for _, l := range strings.Split(string(d.Questions[0].Name), ".") {
			if !kept[l] && !pseudo.MatchString(l) {
				t.Errorf("label %q of %q kept", l, d.Questions[0].Name)
			}
		}
		for _, rr := range d.Answers {
			if !keepAddr(netip.AddrFrom4([4]byte(rr.IP.To4()))) {
				t.Errorf("answer address %s kept", rr.IP)
			}
			sawLinkLocalAnswer = true
		}
	}
	if !sawLinkLocalAnswer {
		t.Error("the link-local answer address was dropped too")
	}
	res := analyzer.Analyze(back, analyzer.DefaultOptions())
	for _, f := range res.Findings {
		if f.LinkLocal != nil && f.LinkLocal.Fixes[0].Kind == "search_path" {
			x := f.LinkLocal.Clients[0].DNS.Expansions[0]
			if !strings.HasSuffix(x.Base, ".example") || strings.Contains(x.Base, "heldout") || len(x.Suffixes) != 4 {
				t.Errorf("redacted expansion %+v", x)
			}
			return
		}
	}
	t.Error("the redacted recording shows no search-path expansion")
}
