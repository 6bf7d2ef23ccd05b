package report

import (
	"bytes"
	stdhtml "html"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/santhosh-tekuri/jsonschema/v6"

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
	var buf bytes.Buffer
	if err := JSON(&buf, in.Result); err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := compileSchema(t).Validate(inst); err != nil {
		t.Errorf("json report does not validate: %v", err)
	}
	if !strings.Contains(buf.String(), `"base": "api.heldout-shop.example"`) || !strings.Contains(buf.String(), `"kind": "search_path"`) {
		t.Error("json lacks the expansion or the fix")
	}
}
