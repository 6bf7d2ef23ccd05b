package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/net/html"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestImpactOldRecording: a recording made before impact was measured
// says so on the finding's Impact line.
func TestImpactOldRecording(t *testing.T) {
	text := renderText(t, loadInput(t, "microburst_out"))
	if !strings.Contains(text, "Impact    impact unknown (recorded before impact was measured)") {
		t.Errorf("text report lacks the unknown impact line:\n%s", text)
	}
}

// impactInput is the microburst_out recording with a TCP victim around its
// incident, as if impact had been measured: the local socket sends 40
// segments again after the burst, its srtt up from 1 ms to 9 ms, and the
// remote end of the connection sends 7 again.
func impactInput(t *testing.T) Input {
	t.Helper()
	rec, err := record.ReadFile(filepath.Join(recordingsDir, "microburst_out.rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var f *analyzer.Finding
	for _, g := range analyzer.Analyze(rec, analyzer.DefaultOptions()).Findings {
		if g.Kind == analyzer.KindMicroburstOut {
			f = &g
			break
		}
	}
	if f == nil {
		t.Fatal("no microburst_out finding")
	}
	rec.Meta.Impact = true
	key := record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.5:40000"), Dst: netip.MustParseAddrPort("10.0.9.9:443")}
	rec.Owners = append(rec.Owners, record.FlowOwner{Interface: f.Interface, Key: key,
		Owner: record.Owner{PID: 4121, Comm: "java", How: "socket"}})
	from := rec.Meta.Start.MonoNs + int64(f.StartOffsetS*1e9)
	rto := from + 300*int64(time.Millisecond)
	first := from - 3*int64(time.Second)
	var packets uint64
	for ns := first; ns <= from+3*int64(time.Second); ns += 100 * int64(time.Millisecond) {
		packets += 100
		st := record.FlowStats{Packets: packets, Bytes: packets * 1500, Directions: 1 << record.Egress,
			FirstSeenNs: first - 1, LastSeenNs: ns - 1, SRTTMinUs: 990, SRTTMaxUs: 1010}
		if ns > from && ns < rto {
			st.SRTTMaxUs = 9000
		}
		if ns >= rto {
			st.RetransLocal, st.RetransWire = 40, 40
		}
		rec.Flows = append(rec.Flows, record.FlowSnapshot{TimeNs: ns, Interface: f.Interface, Key: key, FlowStats: st})
	}
	// The wire saw them leave in the incident's middle.
	mid := from + int64((f.EndOffsetS-f.StartOffsetS)*1e9/2)
	for i := range rec.Series {
		s := &rec.Series[i]
		if s.Interface != f.Interface || s.Direction != record.Egress {
			continue
		}
		b := record.Bucket{StartNs: mid / s.WidthNs * s.WidthNs, Packets: 40, Bytes: 60000, Retrans: 40}
		j, found := slices.BinarySearchFunc(s.Buckets, b.StartNs, func(x record.Bucket, ns int64) int { return cmp.Compare(x.StartNs, ns) })
		if found {
			s.Buckets[j].Retrans = 40
		} else {
			s.Buckets = slices.Insert(s.Buckets, j, b)
		}
	}
	res := analyzer.Analyze(rec, analyzer.DefaultOptions())
	return Input{Result: res, Recording: rec, Env: record.EnvironmentOf(rec)}
}

func TestImpactReports(t *testing.T) {
	in := impactInput(t)
	text := renderText(t, in)
	for _, want := range []string{
		"Impact    dropped: 40 TCP segments sent again (40 egress, 0 ingress) by 1 TCP flow",
		"1 flow paid:",
		"RETRANSMITTED",
		"tcp 10.0.0.5:40000 -> 10.0.9.9:443 (egress)",
		"java[4121]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	page := renderHTML(t, in)
	doc := parseHTML(t, page)
	strips := findAll(doc, func(n *html.Node) bool { return n.Data == "svg" && hasClass(n, "impact") })
	if len(strips) == 0 {
		t.Fatal("no impact strip under the zoom")
	}
	var resent, srtt int
	for _, s := range strips {
		resent += len(findAll(s, func(n *html.Node) bool { return n.Data == "g" && hasClass(n, "resent-egress") }))
		srtt += len(findAll(s, func(n *html.Node) bool { return n.Data == "polyline" }))
	}
	if resent == 0 || srtt == 0 {
		t.Errorf("impact strip with %d retransmission bars and %d srtt lines, want both", resent, srtt)
	}
	if !bytes.Contains(page, []byte("Who paid (victims: 1)")) {
		t.Error("HTML report lacks the victims table")
	}
	sch := compileSchema(t)
	for _, res := range []*analyzer.Result{in.Result, Redact(in).Result} {
		var buf bytes.Buffer
		if err := JSON(&buf, res); err != nil {
			t.Fatal(err)
		}
		var back analyzer.Result
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		dropped := false
		for _, f := range back.Findings {
			dropped = dropped || f.Impact != nil && f.Impact.Verdict == analyzer.ImpactDropped && len(f.Impact.Victims) == 1
		}
		if !dropped {
			t.Error("JSON lacks the impact with its victim")
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Fatalf("report JSON with an impact does not validate: %v", err)
		}
	}
}
