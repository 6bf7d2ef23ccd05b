package analyzer

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestBurstPeakIsTheProfilePeak: a 1 ms burst straddling two fine windows
// of the grid: the finding's peak over the fine window is the profile's
// peak over a window that long (both slide the window over the buckets),
// not half of it in each grid window.
func TestBurstPeakIsTheProfilePeak(t *testing.T) {
	c := synth.Cases()["microburst_out"]
	burst := &c.Spec.Flows[len(c.Spec.Flows)-1]
	from := 4345500 * time.Microsecond // half way through a 1 ms window
	burst.Phases = []synth.Phase{{From: from, To: from + time.Millisecond, Bps: 20e9}}
	rec, _ := synth.Generate(c.Spec)
	opt := DefaultOptions()
	res := Analyze(rec, opt)
	var finding float64
	for _, f := range res.Findings {
		for _, e := range f.Evidence {
			if f.Kind == KindMicroburstOut && e.Name == "peak_fine_window_bps" {
				finding = max(finding, e.Value)
			}
		}
	}
	if finding == 0 {
		t.Fatalf("no microburst_out with its peak: %+v", res.Findings)
	}
	for _, r := range res.Profile.Rates {
		if r.Interface != "eth0" || r.Direction != "egress" {
			continue
		}
		for _, p := range r.Peaks {
			if math.Abs(p.WindowS-opt.FineWindow.Seconds()) < 1e-9 && math.Abs(p.Bps-finding) > 1e-3*p.Bps {
				t.Errorf("the burst's peak %.4g bit/s per %v, the profile's %.4g bit/s", finding, opt.FineWindow, p.Bps)
			}
		}
	}
}

// TestConntrackOwnersCountTheFlowsRows: a connection flood's owners are
// ranked over the window its flow rows are, so one owner of every SYN
// source counts as many flows as the rows do ("[300 flows]" beside
// "(150 flows)" before).
func TestConntrackOwnersCountTheFlowsRows(t *testing.T) {
	rec, err := record.ReadFile(filepath.Join("..", "testdata", "recordings", "conntrack_exceeded.rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[record.FlowKey]bool{}
	for _, f := range rec.Flows {
		if f.Key.Proto == 6 && f.Key.Dst.Port() == 5432 && !seen[f.Key] {
			seen[f.Key] = true
			rec.Owners = append(rec.Owners, record.FlowOwner{Interface: f.Interface, Key: f.Key,
				Owner: record.Owner{PID: 4121, Comm: "client", How: "socket"}})
		}
	}
	res := Analyze(rec, DefaultOptions())
	for _, f := range res.Findings {
		if f.Kind != KindConntrackExceeded {
			continue
		}
		var rows int
		for _, fl := range f.Flows {
			rows += max(fl.Flows, 1)
		}
		if len(f.Owners) != 1 || f.Owners[0].Flows != rows {
			t.Errorf("owners %+v; want one owner of the %d flows the rows count", f.Owners, rows)
		}
		return
	}
	t.Fatal("no conntrack_exceeded")
}
