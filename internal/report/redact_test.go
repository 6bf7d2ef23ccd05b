package report

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

const (
	testHostname = "ip-10-0-0-10.ec2.internal"
	testResolver = "10.0.0.2"
)

// ticketInput is a recording as a real host would record it: an EC2 host
// name that spells its address, a VPC resolver, and a command line naming a
// peer. The cached input is copied, not modified.
func ticketInput(t *testing.T, name string) Input {
	t.Helper()
	in := loadInput(t, name)
	rec := *in.Recording
	rec.Meta.Hostname = testHostname
	rec.Meta.VPCResolver = netip.MustParseAddr(testResolver)
	res := *in.Result
	res.Trace.Hostname = testHostname
	in.Recording, in.Result = &rec, &res
	in.Env.Hostname = testHostname
	in.Env.CommandLine = "enaprobe trace --peer 10.0.1.22 --bundle /tmp/ip-10-0-0-10.tar.gz eth0"
	return in
}

var addrInText = regexp.MustCompile(`\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]`)

// originalAddrs lists the addresses of an input: those of the recording's
// typed fields, and those written in the result's flows.
func originalAddrs(in Input) map[netip.Addr]bool {
	out := map[netip.Addr]bool{in.Recording.Meta.VPCResolver: true}
	for _, f := range in.Recording.Flows {
		out[f.Key.Src.Addr()], out[f.Key.Dst.Addr()] = true, true
	}
	for _, w := range in.Recording.Windows {
		out[w.Key.Src.Addr()], out[w.Key.Dst.Addr()] = true, true
	}
	var b bytes.Buffer
	JSON(&b, in.Result)
	for _, m := range addrInText.FindAllString(b.String(), -1) {
		if a, err := netip.ParseAddr(strings.Trim(m, "[]")); err == nil {
			out[a] = true
		}
	}
	delete(out, netip.Addr{})
	return out
}

// containsAddr finds a as a whole address in s (10.0.0.1 is not inside
// 10.0.0.10).
func containsAddr(s string, a netip.Addr) bool {
	re := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(a.String()) + `($|[^0-9])`)
	return re.MatchString(s)
}

// TestRedactBundle writes redacted bundles of recordings with link-local
// flows, a SYN flood (10.0.0.10:*) and a non-ENA interface, and reads every
// file: no original non-link-local address and no host name is left, the
// link-local addresses are, and each address has one pseudonym everywhere.
func TestRedactBundle(t *testing.T) {
	for _, name := range []string{"linklocal_exceeded", "conntrack_exceeded", "non_ena", "microburst_in"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := ticketInput(t, name)
			addrs := originalAddrs(in)
			var secret, kept []netip.Addr
			for a := range addrs {
				if keepAddr(a) {
					kept = append(kept, a)
				} else {
					secret = append(secret, a)
				}
			}
			if len(secret) < 3 || len(kept) < 1 {
				t.Fatalf("recording has %d addresses to hide and %d link-local ones: not a test", len(secret), len(kept))
			}
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
			recJSON, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			files["recording.json"] = recJSON
			delete(files, record.BundleRecording)
			for fname, data := range files {
				s := string(data)
				for _, a := range secret {
					if containsAddr(s, a) {
						t.Errorf("%s still holds %s", fname, a)
					}
				}
				for _, h := range []string{testHostname, "ip-10-0-0-10", in.Recording.Meta.Hostname} {
					if strings.Contains(s, h) {
						t.Errorf("%s still holds the host name %q", fname, h)
					}
				}
				if fname != record.BundleEnvironment && !containsAddr(s, netip.MustParseAddr("169.254.169.253")) {
					t.Errorf("%s lost the link-local address 169.254.169.253", fname)
				}
			}
			checkPseudonyms(t, in, red)
		})
	}
}

// checkPseudonyms maps every address of the original recording to the one
// at the same place in the redacted recording, and checks that the map is
// one-to-one, lands in the documentation ranges, and is the one the text
// of the result and environment followed.
func checkPseudonyms(t *testing.T, in, red Input) {
	t.Helper()
	pseudo := map[netip.Addr]netip.Addr{}
	note := func(orig, got netip.Addr) {
		if p, ok := pseudo[orig]; ok && p != got {
			t.Errorf("%s became both %s and %s", orig, p, got)
		}
		pseudo[orig] = got
	}
	for i, f := range in.Recording.Flows {
		g := red.Recording.Flows[i]
		note(f.Key.Src.Addr(), g.Key.Src.Addr())
		note(f.Key.Dst.Addr(), g.Key.Dst.Addr())
		if f.Key.Src.Port() != g.Key.Src.Port() || f.Key.Dst.Port() != g.Key.Dst.Port() {
			t.Fatalf("ports changed: %v -> %v", f.Key, g.Key)
		}
	}
	note(in.Recording.Meta.VPCResolver, red.Recording.Meta.VPCResolver)
	seen := map[netip.Addr]netip.Addr{}
	for orig, p := range pseudo {
		switch {
		case keepAddr(orig):
			if p != orig {
				t.Errorf("link-local %s became %s", orig, p)
			}
			continue
		case !pseudo4.Contains(p) && !pseudo6.Contains(p):
			t.Errorf("%s became %s, outside 198.18.0.0/15 and 2001:db8::/32", orig, p)
		case orig.Is4() != p.Is4():
			t.Errorf("%s became %s: another family", orig, p)
		}
		if o, dup := seen[p]; dup {
			t.Errorf("%s and %s both became %s", o, orig, p)
		}
		seen[p] = orig
	}
	// The text of the result names the same pseudonyms.
	for i, f := range in.Result.Findings {
		g := red.Result.Findings[i]
		for orig, p := range pseudo {
			if containsAddr(f.Summary, orig) && !containsAddr(g.Summary, p) {
				t.Errorf("finding %s: summary names %s, redacted one lacks its pseudonym %s", f.Kind, orig, p)
			}
		}
		for j, fl := range f.Flows {
			want := fl.Src
			for orig, p := range pseudo {
				if strings.HasPrefix(fl.Src, orig.String()+":") {
					want = p.String() + strings.TrimPrefix(fl.Src, orig.String())
				}
			}
			if got := g.Flows[j].Src; got != want {
				t.Errorf("finding %s flow %d: src %q, want %q", f.Kind, j, got, want)
			}
		}
	}
	host := red.Env.Hostname
	if !strings.HasPrefix(host, "host-") || red.Result.Trace.Hostname != host || red.Recording.Meta.Hostname != host {
		t.Errorf("host names %q, %q, %q: want one host-… pseudonym", host, red.Result.Trace.Hostname, red.Recording.Meta.Hostname)
	}
	peer := pseudo[netip.MustParseAddr("10.0.1.22")]
	if peer.IsValid() && !strings.Contains(red.Env.CommandLine, "--peer "+peer.String()) {
		t.Errorf("command line %q does not name the peer's pseudonym %s", red.Env.CommandLine, peer)
	}
}

// TestRedactedRecordingAnalyzes: the pseudonyms are consistent enough for
// the redacted recording to give the same findings (the VPC resolver and
// the flows to it are renamed alike).
func TestRedactedRecordingAnalyzes(t *testing.T) {
	for _, name := range []string{"linklocal_exceeded", "conntrack_exceeded"} {
		in := ticketInput(t, name)
		red := Redact(in)
		got := analyzer.Analyze(red.Recording, analyzer.DefaultOptions())
		want := analyzer.Analyze(in.Recording, analyzer.DefaultOptions())
		if len(got.Findings) != len(want.Findings) {
			t.Fatalf("%s: %d findings after redaction, %d before", name, len(got.Findings), len(want.Findings))
		}
		for i := range got.Findings {
			g, w := got.Findings[i], want.Findings[i]
			if g.Kind != w.Kind || g.Start != w.Start || len(g.Flows) != len(w.Flows) {
				t.Errorf("%s finding %d: %s at %v with %d flows, was %s at %v with %d", name, i,
					g.Kind, g.Start, len(g.Flows), w.Kind, w.Start, len(w.Flows))
			}
		}
	}
}

func TestRedactLeavesInputAlone(t *testing.T) {
	in := ticketInput(t, "microburst_out")
	src := in.Recording.Flows[0].Key.Src
	summary := in.Result.Findings[0].Summary
	red := Redact(in)
	if in.Recording.Flows[0].Key.Src != src || in.Result.Findings[0].Summary != summary || in.Env.Hostname != testHostname {
		t.Error("Redact modified its input")
	}
	if red.Recording.Flows[0].Key.Src == src || red.Result.Findings[0].Summary == summary {
		t.Error("Redact changed nothing")
	}
	if &red.Recording.Series[0].Buckets[0] == &in.Recording.Series[0].Buckets[0] {
		t.Error("redacted recording shares its buckets with the input")
	}
}

func TestRedactText(t *testing.T) {
	r := newRedactor([]byte("fixed test key"))
	r.addHost("db-7.corp.example.com")
	a := func(s string) string { return r.addr(netip.MustParseAddr(s)).String() }
	cases := []struct{ in, want string }{
		{"mostly tcp 10.0.0.10:41000 -> 10.0.1.22:9000 (99%)", "mostly tcp " + a("10.0.0.10") + ":41000 -> " + a("10.0.1.22") + ":9000 (99%)"},
		{"from 10.0.0.7:* to 169.254.169.254:80", "from " + a("10.0.0.7") + ":* to 169.254.169.254:80"},
		{"sent to 10.0.0.1.", "sent to " + a("10.0.0.1") + "."},
		{"[2001:4860::8888]:53 and fe80::1%eth0", "[" + a("2001:4860::8888") + "]:53 and fe80::1%eth0"},
		{"fd00:ec2::254 and fd00:ec2::123", "fd00:ec2::254 and fd00:ec2::123"},
		{"::ffff:10.0.0.1", a("::ffff:10.0.0.1")},
		{"10.0.0.0/16", a("10.0.0.0") + "/16"},
		{"driver 2.13.0.1g at 10:00:04.345, kernel 6.1.0-26", "driver 2.13.0.1g at 10:00:04.345, kernel 6.1.0-26"},
		{"deadbeef cafe", "deadbeef cafe"},
		{"host ip-10-0-0-10 up", "host ip-" + strings.ReplaceAll(a("10.0.0.10"), ".", "-") + " up"},
		{"ship-10-0-0-10", "ship-10-0-0-10"},
		{"db-7.corp.example.com and db-7 but not db-70", r.hosts[0].to + " and " + r.hosts[0].to + " but not db-70"},
	}
	for _, c := range cases {
		if got := r.text(c.in); got != c.want {
			t.Errorf("text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if p := a("::ffff:10.0.0.1"); !strings.HasPrefix(p, "::ffff:198.1") {
		t.Errorf("mapped address became %s", p)
	}
	// The same key gives the same pseudonyms, another key others.
	same := newRedactor([]byte("fixed test key"))
	other := newRedactor([]byte("another key"))
	x := netip.MustParseAddr("10.20.30.40")
	if r.addr(x) != same.addr(x) || r.addr(x) == other.addr(x) {
		t.Errorf("pseudonyms of %s: %s, %s (same key), %s (other key)", x, r.addr(x), same.addr(x), other.addr(x))
	}
}

// TestRedactManyAddresses maps more IPv4 addresses than 198.18.0.0/15
// holds (a spoofed flood): every pseudonym stays unique, the overflow goes
// to IPv6, and nothing loops forever.
func TestRedactManyAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("maps 140,000 addresses")
	}
	r := newRedactor([]byte("k"))
	seen := make(map[netip.Addr]bool, 140_000)
	v6 := 0
	for i := range uint32(140_000) {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		p := r.addr(a)
		if seen[p] {
			t.Fatalf("%s: pseudonym %s given twice", a, p)
		}
		seen[p] = true
		if p.Is6() {
			v6++
		}
	}
	if v6 < 140_000-(1<<17) {
		t.Errorf("%d IPv6 pseudonyms, want at least %d", v6, 140_000-(1<<17))
	}
}
