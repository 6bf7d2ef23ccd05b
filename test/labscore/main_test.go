package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestScore scores a kept lab recording (testdata/lab) as a run: right
// with its truth both ways, the lag in its range (inbound, one burst
// between reads 50 ms apart: a range only, analyzer/timing.go), wrong
// once the truth's burst is moved 10 ms later, its finding then starting
// too early, and right where its sender began 10 ms before the first
// send returned at the burst (catalog.Burst.WireStart).
func TestScore(t *testing.T) {
	dir := t.TempDir()
	const name = "impact-inbound-bunch-gap"
	run := filepath.Join(dir, "ig")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join("../../testdata/lab", name+".rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	env := `{"command_line": "enaprobe lab run impact-inbound --allowance given -o ig"}`
	for path, b := range map[string][]byte{
		filepath.Join(run, "recording.json.gz"): rec,
		filepath.Join(run, "environment.json"):  []byte(env),
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	truth, err := os.ReadFile(filepath.Join("../../testdata/lab", name+".truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeTruth := func(b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "ig.truth.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTruth(truth)
	if names, err := bundles(dir); err != nil || len(names) != 1 || names[0] != "ig" {
		t.Fatalf("bundles = %v, %v; want [ig]", names, err)
	}
	for _, mode := range []string{"recorded", "unknown"} {
		v, err := score(dir, "ig", mode)
		if err != nil {
			t.Fatal(err)
		}
		if !v.right || v.lagClass != "within" && v.lagClass != "inside" {
			t.Errorf("%s: %s, want right, the lag in its range", mode, v.line())
		}
	}
	var moved map[string]any
	if err := json.Unmarshal(truth, &moved); err != nil {
		t.Fatal(err)
	}
	b := moved["Bursts"].([]any)[0].(map[string]any)
	b["StartNs"] = b["StartNs"].(float64) + 10e6
	out, _ := json.Marshal(moved)
	writeTruth(out)
	v, err := score(dir, "ig", "recorded")
	if err != nil {
		t.Fatal(err)
	}
	if v.right || !strings.Contains(v.line(), "missed (nearest -10.") {
		t.Errorf("the burst moved 10 ms later: %s, want it missed, the finding 10 ms early", v.line())
	}
	// Its sender begun 10 ms earlier, descheduled before its first send
	// returned where the burst had begun: the finding is not late.
	start := b["StartNs"].(float64) - 10e6
	b["StartNs"], b["FirstSentNs"] = start-10e6, start
	out, _ = json.Marshal(moved)
	writeTruth(out)
	if v, err = score(dir, "ig", "recorded"); err != nil {
		t.Fatal(err)
	}
	if !v.right {
		t.Errorf("the sender begun 10 ms before its first send returned: %s, want right", v.line())
	}
	delete(b, "FirstSentNs")
	out, _ = json.Marshal(moved)
	writeTruth(out)
	if v, err = score(dir, "ig", "recorded"); err != nil {
		t.Fatal(err)
	}
	if v.right || !strings.Contains(v.line(), "missed (nearest +9.") {
		t.Errorf("the burst moved 10 ms earlier, no first send kept: %s, want it missed, the finding 10 ms late", v.line())
	}
}

// TestOwnOverflow: a finding naming the TCP flow beside a burst is right
// only where the lab's counter moved for that flow's traffic, away from
// the burst and what drained behind it.
func TestOwnOverflow(t *testing.T) {
	const ms = int64(time.Millisecond)
	const ctr = "bw_out_allowance_exceeded"
	t0 := int64(1000 * time.Second)
	burst := netip.MustParseAddrPort("198.18.0.10:42013")
	tcp := netip.MustParseAddrPort("198.18.0.10:44142")
	truth := catalog.Truth{Bursts: []catalog.Burst{{StartNs: t0 + 1800*ms, EndNs: t0 + 1880*ms, Src: burst}}, QueueDelay: 16 * time.Millisecond}
	rec := &record.Recording{Meta: record.Meta{Start: record.ClockPair{MonoNs: t0}}}
	// Reads every 10 ms; the counter moves at 555 ms (4) and 1,905 ms
	// (30, behind the burst).
	v := uint64(0)
	for at := int64(5); at < 3000; at += 10 {
		switch at {
		case 555:
			v += 4
		case 1905:
			v += 30
		}
		rec.Counters = append(rec.Counters, record.CounterSample{Interface: "ens5", BeforeNs: t0 + at*ms, AfterNs: t0 + at*ms + ms/10,
			Values: map[string]uint64{ctr: v}})
	}
	finding := func(src netip.AddrPort, from, to float64) analyzer.Finding {
		return analyzer.Finding{Kind: analyzer.KindMicroburstOut, Interface: "ens5", StartOffsetS: from, EndOffsetS: to,
			Flows: []analyzer.FlowShare{{Src: src.String()}}, Incident: &analyzer.Incident{Counter: ctr}}
	}
	for _, c := range []struct {
		name string
		f    analyzer.Finding
		want bool
	}{
		{"the tcp flow's bunch before the read that moved", finding(tcp, 0.540, 0.541), true},
		{"the tcp flow's bunch the read before it", finding(tcp, 0.530, 0.531), true},
		{"the tcp flow where the counter stayed still", finding(tcp, 0.900, 0.901), false},
		{"the tcp flow behind the burst", finding(tcp, 1.895, 1.900), false},
		{"the burst's own flow", finding(burst, 0.540, 0.541), false},
	} {
		if got := ownOverflow(rec, truth, c.f); got != c.want {
			t.Errorf("%s: ownOverflow = %v, want %v", c.name, got, c.want)
		}
	}
	// Counters shown up to 400 ms late: the move at 555 ms may show
	// drops made up to 400 ms before the read ahead of it.
	truth.CounterAgeMaxNs = int64(400 * time.Millisecond)
	if !ownOverflow(rec, truth, finding(tcp, 0.300, 0.301)) {
		t.Error("a move that may show drops made 400 ms before it: the bunch then, want own")
	}
}

// TestChanges counts the reads at which a counter rose: not the reads
// that failed, those of another interface, or those without the counter.
func TestChanges(t *testing.T) {
	const ctr = "bw_out_allowance_exceeded"
	rec := &record.Recording{}
	add := func(iface string, v uint64, errText string) {
		c := record.CounterSample{Interface: iface, Err: errText}
		if errText == "" {
			c.Values = map[string]uint64{ctr: v}
		}
		rec.Counters = append(rec.Counters, c)
	}
	add("ens5", 0, "")
	add("ens5", 5, "") // rose
	add("ens6", 50, "")
	add("ens5", 5, "")
	add("ens5", 0, "read failed")
	add("ens5", 9, "") // rose
	add("ens5", 9, "")
	if got := changes(rec, "ens5", ctr); got != 2 {
		t.Errorf("changes = %d, want 2", got)
	}
	if got := changes(rec, "ens5", "pps_allowance_exceeded"); got != 0 {
		t.Errorf("changes of a counter never read = %d, want 0", got)
	}
}

// TestClassLagFlood: a flood seconds long is shown at every read through
// it, so the lab's lag is its jumps' median age; a burst's is how late the
// lab showed its end. The same finding, 32.8 ms (30.8 to 34.9), against a
// 3 s flood whose jumps were 30 to 36 ms old and whose end one poll showed
// 40.8 ms late: within 5 ms of their median, 33; against a 50 ms burst
// shown so: outside its range.
func TestClassLagFlood(t *testing.T) {
	const counter = "linklocal_allowance_exceeded"
	found := []analyzer.Finding{{Incident: &analyzer.Incident{Counter: counter, CounterLagS: 0.0328, CounterLagLowS: 0.0308, CounterLagHighS: 0.0349}}}
	const start = int64(10 * time.Second)
	for _, c := range []struct {
		name     string
		duration time.Duration
		want     string
	}{
		{"flood", 3 * time.Second, "within"},
		{"burst", 50 * time.Millisecond, "outside"},
	} {
		truth := catalog.Truth{Bursts: []catalog.Burst{{StartNs: start, EndNs: start + int64(c.duration), ShownAfterNs: int64(40800 * time.Microsecond)}}}
		for k := int64(0); k*int64(10*time.Millisecond) < int64(c.duration); k++ {
			read := start + k*int64(10*time.Millisecond)
			age := int64(30*time.Millisecond) + k%7*int64(time.Millisecond)
			truth.CounterJumps = append(truth.CounterJumps, lab.ShownJump{Counter: counter, ReadNs: read, ShownNs: read, AgeNs: age})
		}
		var v verdict
		v.classLag(found, truth)
		if v.lagClass != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, v.lagClass, v.lag, c.want)
		}
	}
}
