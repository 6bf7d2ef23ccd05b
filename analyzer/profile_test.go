package analyzer

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/bpf/countrules"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestProfileSteady compares the profile of the steady recording with the
// rates its scenario describes.
func TestProfileSteady(t *testing.T) {
	c := synth.Cases()["steady"]
	rec, err := record.ReadFile(recordingPath("steady"))
	if err != nil {
		t.Fatal(err)
	}
	res := Analyze(rec, DefaultOptions())
	dur := c.Spec.Duration.Seconds()

	var want [record.NumDirections]float64
	var top synth.Flow
	var dnsPPS float64
	for _, f := range c.Spec.Flows {
		bps := f.Phases[0].Bps * (f.Phases[0].To - f.Phases[0].From).Seconds() / dur
		want[f.Dir] += bps
		if top.Phases == nil || f.Phases[0].Bps > top.Phases[0].Bps {
			top = f
		}
		if f.Dir == record.Egress && countrules.FlowService(f.Key(), netip.Addr{}) == record.ServiceDNS {
			dnsPPS += f.Phases[0].Bps / 8 / float64(f.Size)
		}
	}
	for _, r := range res.Profile.Rates {
		dir := record.Ingress
		if r.Direction == "egress" {
			dir = record.Egress
		}
		if rel := math.Abs(r.MeanBps-want[dir]) / want[dir]; rel > 0.01 {
			t.Errorf("%s mean %.0f bps, scenario %.0f (%.1f%% off)", r.Direction, r.MeanBps, want[dir], 100*rel)
		}
		if len(r.Peaks) != 3 || len(r.Averages) != 2 {
			t.Fatalf("%s: %d peaks, %d averages", r.Direction, len(r.Peaks), len(r.Averages))
		}
		for i := 1; i < len(r.Peaks); i++ {
			// A longer window averages more, so its peak is never higher.
			if r.Peaks[i].Bps > r.Peaks[i-1].Bps+1 {
				t.Errorf("%s: peak over %.3f s (%.0f) above peak over %.3f s (%.0f)", r.Direction,
					r.Peaks[i].WindowS, r.Peaks[i].Bps, r.Peaks[i-1].WindowS, r.Peaks[i-1].Bps)
			}
		}
		for _, av := range r.Averages {
			if !av.Partial || av.Periods != 0 || av.CoveredS != dur || av.Bps != r.MeanBps {
				t.Errorf("%s %.0f s average on a %.0f s trace: %+v, want partial over the trace at the mean", r.Direction, av.PeriodS, dur, av)
			}
		}
	}
	if len(res.Profile.TopFlows) == 0 || res.Profile.TopFlows[0].Src != top.Src.String() || res.Profile.TopFlows[0].Dst != top.Dst.String() {
		t.Errorf("top flow %+v, want %s -> %s", res.Profile.TopFlows, top.Src, top.Dst)
	}
	var sawDNS bool
	for _, l := range res.Profile.LinkLocal {
		if l.Direction == "egress" && l.Service == "dns" {
			sawDNS = true
			if math.Abs(l.PeakPPS1s-dnsPPS) > 1 {
				t.Errorf("dns peak 1 s rate %.1f pps, scenario %.1f", l.PeakPPS1s, dnsPPS)
			}
		}
	}
	if !sawDNS {
		t.Error("no egress dns row in the link-local profile")
	}
	for _, m := range res.Profile.SizeMix {
		var s float64
		for _, c := range m.Classes {
			s += c.Share
		}
		if math.Abs(s-1) > 1e-9 {
			t.Errorf("%s %s size shares add up to %f", m.Interface, m.Direction, s)
		}
	}
	for _, l := range res.Profile.CounterReadLatency {
		if l.Reads == 0 || l.MinUs <= 0 || l.MinUs > l.MedianUs || l.MedianUs > l.MaxUs {
			t.Errorf("read latency %+v", l)
		}
	}
}

// TestCloudWatchAverages: a trace longer than a minute gets whole periods,
// the highest of which is what CloudWatch would plot; the 5-minute period
// does not fit and is the average over the trace, marked partial.
func TestCloudWatchAverages(t *testing.T) {
	const trace = 150 * time.Second
	flow := synth.Flow{Interface: "eth0", Dir: record.Egress, Proto: 6, Size: 1500,
		Src: netip.MustParseAddrPort("10.0.0.10:40000"), Dst: netip.MustParseAddrPort("10.0.1.1:443"),
		Phases: []synth.Phase{{From: 0, To: 70 * time.Second, Bps: 100e6}, {From: 70 * time.Second, To: 80 * time.Second, Bps: 700e6},
			{From: 80 * time.Second, To: trace, Bps: 100e6}}}
	rec, _ := synth.Generate(synth.Spec{Name: "cloudwatch", Duration: trace, SampleNs: 10e9, BucketNs: 10_000_000,
		WindowNs: 10_000_000, Interfaces: []synth.Interface{{Name: "eth0"}}, Flows: []synth.Flow{flow}})
	// averageOver is the scenario's mean rate over [from, to).
	averageOver := func(from, to time.Duration) float64 {
		var bits float64
		for _, p := range flow.Phases {
			if lo, hi := max(p.From, from), min(p.To, to); hi > lo {
				bits += p.Bps * (hi - lo).Seconds()
			}
		}
		return bits / (to - from).Seconds()
	}
	wantMinute := max(averageOver(0, time.Minute), averageOver(time.Minute, 2*time.Minute))
	res := Analyze(rec, DefaultOptions())
	var seen bool
	for _, r := range res.Profile.Rates {
		if r.Direction != "egress" {
			continue
		}
		seen = true
		minute, five := r.Averages[0], r.Averages[1]
		if minute.Periods != 2 || minute.Partial || math.Abs(minute.Bps-wantMinute)/wantMinute > 0.001 {
			t.Errorf("1-minute average %+v, want 2 whole periods, highest %.0f bps", minute, wantMinute)
		}
		if want := averageOver(0, trace); !five.Partial || five.CoveredS != trace.Seconds() || math.Abs(five.Bps-want)/want > 0.001 {
			t.Errorf("5-minute average %+v, want partial over %.0f s at %.0f bps", five, trace.Seconds(), want)
		}
		// Every 1 s window inside the 700 Mbps phase is a peak.
		fast := flow.Phases[1]
		if p := r.Peaks[2]; math.Abs(p.Bps-fast.Bps)/fast.Bps > 0.001 || p.BpsAtOffset < fast.From.Seconds() ||
			p.BpsAtOffset > (fast.To-time.Second).Seconds() {
			t.Errorf("1 s peak %+v, want %.0f bps inside [%v, %v)", p, fast.Bps, fast.From, fast.To)
		}
	}
	if !seen {
		t.Fatal("no egress rate profile")
	}
}

// TestFlowPeaksAgree: two identical 2 ms bursts of 2.4 Gbit/s, one from a
// flow seen for the first time, one from a flow that trickled before, show
// the same per-flow peak (issue 26: 2.3 Gbit/s and 24.7 Mbit/s, one divided
// by the time since the flow's first packet, the other by the drain
// interval): both the fullest of their fine windows.
func TestFlowPeaksAgree(t *testing.T) {
	src := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.5"), port) }
	dst := netip.MustParseAddrPort("10.0.1.9:9")
	burst := func(at time.Duration) synth.Phase {
		return synth.Phase{From: at, To: at + 2*time.Millisecond, Bps: 2.4e9}
	}
	spec := synth.Spec{Name: "two-bursts", Duration: 2 * time.Second, Interfaces: []synth.Interface{{Name: "eth0"}},
		Flows: []synth.Flow{
			{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: src(1000), Dst: dst, Size: 1200, Phases: []synth.Phase{burst(500 * time.Millisecond)}},
			{Interface: "eth0", Dir: record.Egress, Proto: 17, Src: src(2000), Dst: dst, Size: 1200, Phases: []synth.Phase{
				{From: 0, To: 1200 * time.Millisecond, Bps: 100_000}, burst(1250 * time.Millisecond)}},
		}}
	rec, _ := synth.Generate(spec)
	res := Analyze(rec, DefaultOptions())
	peaks := map[string]float64{}
	for _, f := range res.Profile.TopFlows {
		peaks[f.Src] = f.PeakBps
	}
	a, b := peaks[src(1000).String()], peaks[src(2000).String()]
	if a == 0 || b == 0 || math.Abs(a-b) > 0.05*max(a, b) {
		t.Errorf("per-flow peaks %.3g and %.3g bit/s for two identical bursts, want the same", a, b)
	}
	if a < 1e9 {
		t.Errorf("peak %.3g bit/s for a 2.4 Gbit/s burst over two fine windows", a)
	}
}
