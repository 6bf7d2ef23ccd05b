package counters

import (
	"reflect"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// sample builds a successful read of eth0 taking 100 ns from beforeNs.
func sample(beforeNs int64, values map[string]uint64) record.CounterSample {
	return record.CounterSample{Interface: "eth0", BeforeNs: beforeNs, AfterNs: beforeNs + 100, Values: values}
}

func failed(beforeNs int64, err string) record.CounterSample {
	return record.CounterSample{Interface: "eth0", BeforeNs: beforeNs, AfterNs: beforeNs + 100, Err: err}
}

func TestDiffJumps(t *testing.T) {
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 10, BwInAllowanceExceeded: 0}),
		sample(2000, map[string]uint64{PPSAllowanceExceeded: 10, BwInAllowanceExceeded: 5}),
		sample(3000, map[string]uint64{PPSAllowanceExceeded: 13, BwInAllowanceExceeded: 6}),
	}
	ch := Diff(samples)
	want := []Jump{
		{Interface: "eth0", Name: BwInAllowanceExceeded, FromNs: 1100, ToNs: 2000, Delta: 5},
		{Interface: "eth0", Name: BwInAllowanceExceeded, FromNs: 2100, ToNs: 3000, Delta: 1},
		{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 2100, ToNs: 3000, Delta: 3},
	}
	if !reflect.DeepEqual(ch.Jumps, want) {
		t.Errorf("jumps = %+v\nwant %+v", ch.Jumps, want)
	}
	if len(ch.Resets) != 0 || len(ch.Failed) != 0 || len(ch.Gauges) != 0 {
		t.Errorf("unexpected events: %+v", ch)
	}
	wantTotals := map[Key]uint64{
		{"eth0", PPSAllowanceExceeded}:  3,
		{"eth0", BwInAllowanceExceeded}: 6,
	}
	if !reflect.DeepEqual(ch.Totals, wantTotals) {
		t.Errorf("totals = %v, want %v", ch.Totals, wantTotals)
	}
	if got := ch.JumpsOf(PPSAllowanceExceeded); len(got) != 1 || got[0].Delta != 3 {
		t.Errorf("JumpsOf(pps) = %+v", got)
	}
}

func TestDiffResetToZero(t *testing.T) {
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 50, TotalResets: 0}),
		sample(2000, map[string]uint64{PPSAllowanceExceeded: 0, TotalResets: 1}),
		sample(3000, map[string]uint64{PPSAllowanceExceeded: 4, TotalResets: 1}),
	}
	ch := Diff(samples)
	wantResets := []Reset{{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 1100, ToNs: 2000, From: 50, To: 0}}
	if !reflect.DeepEqual(ch.Resets, wantResets) {
		t.Errorf("resets = %+v, want %+v", ch.Resets, wantResets)
	}
	// total_resets rose, so the all-zero read is a reset, not a failed read.
	if len(ch.Failed) != 0 {
		t.Errorf("failed = %+v, want none", ch.Failed)
	}
	// No negative delta and no invented delta over the reset: only the jump
	// after it, and the total_resets jump.
	wantJumps := []Jump{
		{Interface: "eth0", Name: TotalResets, FromNs: 1100, ToNs: 2000, Delta: 1},
		{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 2100, ToNs: 3000, Delta: 4},
	}
	if !reflect.DeepEqual(ch.Jumps, wantJumps) {
		t.Errorf("jumps = %+v\nwant %+v", ch.Jumps, wantJumps)
	}
	if got := ch.Totals[Key{"eth0", PPSAllowanceExceeded}]; got != 4 {
		t.Errorf("pps total = %d, want 4", got)
	}
}

func TestDiffResetNotToZero(t *testing.T) {
	// A counter that drops but not to zero, beside one that keeps counting:
	// not an all-zero read, so a reset of that counter only.
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{BwOutAllowanceExceeded: 900, "queue_0_tx_cnt": 10}),
		sample(2000, map[string]uint64{BwOutAllowanceExceeded: 7, "queue_0_tx_cnt": 20}),
	}
	ch := Diff(samples)
	if len(ch.Resets) != 1 || ch.Resets[0].From != 900 || ch.Resets[0].To != 7 {
		t.Errorf("resets = %+v", ch.Resets)
	}
	if len(ch.Jumps) != 1 || ch.Jumps[0].Name != "queue_0_tx_cnt" || ch.Jumps[0].Delta != 10 {
		t.Errorf("jumps = %+v", ch.Jumps)
	}
}

func TestDiffFailedRead(t *testing.T) {
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 10}),
		failed(2000, "read ethtool stats of eth0: no such device"),
		sample(3000, map[string]uint64{PPSAllowanceExceeded: 12}),
	}
	ch := Diff(samples)
	wantFailed := []FailedRead{{Interface: "eth0", BeforeNs: 2000, AfterNs: 2100, Reason: "read ethtool stats of eth0: no such device"}}
	if !reflect.DeepEqual(ch.Failed, wantFailed) {
		t.Errorf("failed = %+v, want %+v", ch.Failed, wantFailed)
	}
	// The jump spans the failed read.
	wantJumps := []Jump{{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 1100, ToNs: 3000, Delta: 2}}
	if !reflect.DeepEqual(ch.Jumps, wantJumps) {
		t.Errorf("jumps = %+v, want %+v", ch.Jumps, wantJumps)
	}
}

func TestDiffAllZeroReadIsFailed(t *testing.T) {
	// The ENA admin command failed: device counters read zero while the
	// driver's queue counters go on. Not a reset: the next read is back.
	dev := func(pps, avail, txCnt uint64) map[string]uint64 {
		return map[string]uint64{
			BwInAllowanceExceeded: 0, PPSAllowanceExceeded: pps, ConntrackAllowanceAvailable: avail,
			TotalResets: 0, "queue_0_tx_cnt": txCnt,
		}
	}
	samples := []record.CounterSample{
		sample(1000, dev(10, 5000, 100)),
		sample(2000, dev(0, 0, 150)),
		sample(3000, dev(11, 4990, 170)),
	}
	ch := Diff(samples)
	if len(ch.Failed) != 1 || ch.Failed[0].BeforeNs != 2000 || ch.Failed[0].Reason != ReasonAllZero {
		t.Fatalf("failed = %+v, want the read at 2000 as %q", ch.Failed, ReasonAllZero)
	}
	if len(ch.Resets) != 0 {
		t.Errorf("resets = %+v, want none", ch.Resets)
	}
	wantJumps := []Jump{
		{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 1100, ToNs: 3000, Delta: 1},
		{Interface: "eth0", Name: "queue_0_tx_cnt", FromNs: 1100, ToNs: 3000, Delta: 70},
	}
	if !reflect.DeepEqual(ch.Jumps, wantJumps) {
		t.Errorf("jumps = %+v\nwant %+v", ch.Jumps, wantJumps)
	}
	// The zero gauge value of the failed read is not reported.
	for _, g := range ch.Gauges {
		if g.Value == 0 {
			t.Errorf("gauge from the failed read reported: %+v", g)
		}
	}
}

func TestDiffAllZeroFromStart(t *testing.T) {
	// A quiet interface reads zero from the start: nothing failed.
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 0, BwInAllowanceExceeded: 0}),
		sample(2000, map[string]uint64{PPSAllowanceExceeded: 0, BwInAllowanceExceeded: 0}),
	}
	ch := Diff(samples)
	if len(ch.Failed) != 0 || len(ch.Jumps) != 0 || len(ch.Resets) != 0 {
		t.Errorf("changes = %+v, want none", ch)
	}
	if v, ok := ch.Totals[Key{"eth0", PPSAllowanceExceeded}]; !ok || v != 0 {
		t.Errorf("pps total = %d, %v; want 0, present", v, ok)
	}
}

func TestDiffAllZeroWithoutDeviceCounters(t *testing.T) {
	// A non-ENA source whose whole read is zero after nonzero values.
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{"rx_queue_0_xdp_packets": 5}),
		sample(2000, map[string]uint64{"rx_queue_0_xdp_packets": 0}),
	}
	ch := Diff(samples)
	if len(ch.Failed) != 1 || ch.Failed[0].Reason != ReasonAllZero || len(ch.Resets) != 0 {
		t.Errorf("changes = %+v, want one all-zero failed read", ch)
	}
}

func TestDiffGauges(t *testing.T) {
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{ConntrackAllowanceAvailable: 5000, SRDMode: 3, SRDResourceUtilization: 2, SRDTxPkts: 100}),
		sample(2000, map[string]uint64{ConntrackAllowanceAvailable: 4200, SRDMode: 3, SRDResourceUtilization: 0, SRDTxPkts: 180}),
		sample(3000, map[string]uint64{ConntrackAllowanceAvailable: 4800, SRDMode: 1, SRDResourceUtilization: 7, SRDTxPkts: 180}),
	}
	ch := Diff(samples)
	var avail []uint64
	for _, g := range ch.Gauges {
		if !IsGauge(g.Name) {
			t.Errorf("cumulative %s reported as a gauge", g.Name)
		}
		if g.Name == ConntrackAllowanceAvailable {
			avail = append(avail, g.Value)
		}
	}
	if !reflect.DeepEqual(avail, []uint64{5000, 4200, 4800}) {
		t.Errorf("conntrack_allowance_available series = %v", avail)
	}
	if len(ch.Gauges) != 9 {
		t.Errorf("%d gauge values, want 9", len(ch.Gauges))
	}
	// A gauge going down is not a reset, and gauges have no totals.
	if len(ch.Resets) != 0 {
		t.Errorf("resets = %+v, want none", ch.Resets)
	}
	if _, ok := ch.Totals[Key{"eth0", ConntrackAllowanceAvailable}]; ok {
		t.Error("gauge has a total")
	}
	wantJumps := []Jump{{Interface: "eth0", Name: SRDTxPkts, FromNs: 1100, ToNs: 2000, Delta: 80}}
	if !reflect.DeepEqual(ch.Jumps, wantJumps) {
		t.Errorf("jumps = %+v, want %+v", ch.Jumps, wantJumps)
	}
}

func TestDiffAbsentCounter(t *testing.T) {
	// A counter missing from one read is compared with the last read that
	// held it; a counter never read has no total.
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 1}),
		sample(2000, map[string]uint64{"queue_0_tx_cnt": 5}),
		sample(3000, map[string]uint64{PPSAllowanceExceeded: 4, "queue_0_tx_cnt": 5}),
	}
	ch := Diff(samples)
	wantJumps := []Jump{{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 1100, ToNs: 3000, Delta: 3}}
	if !reflect.DeepEqual(ch.Jumps, wantJumps) {
		t.Errorf("jumps = %+v, want %+v", ch.Jumps, wantJumps)
	}
	if _, ok := ch.Totals[Key{"eth0", TotalResets}]; ok {
		t.Error("absent total_resets has a total")
	}
}

func TestDiffInterfacesAndOrder(t *testing.T) {
	// Two interfaces interleaved and out of order: each followed on its own.
	a := func(ns int64, v uint64) record.CounterSample {
		return record.CounterSample{Interface: "eth0", BeforeNs: ns, AfterNs: ns + 10, Values: map[string]uint64{PPSAllowanceExceeded: v}}
	}
	b := func(ns int64, v uint64) record.CounterSample {
		return record.CounterSample{Interface: "eth1", BeforeNs: ns, AfterNs: ns + 10, Values: map[string]uint64{PPSAllowanceExceeded: v}}
	}
	ch := Diff([]record.CounterSample{a(3000, 9), b(1500, 100), a(1000, 1), b(2500, 102), a(2000, 4)})
	want := []Jump{
		{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 1010, ToNs: 2000, Delta: 3},
		{Interface: "eth1", Name: PPSAllowanceExceeded, FromNs: 1510, ToNs: 2500, Delta: 2},
		{Interface: "eth0", Name: PPSAllowanceExceeded, FromNs: 2010, ToNs: 3000, Delta: 5},
	}
	if !reflect.DeepEqual(ch.Jumps, want) {
		t.Errorf("jumps = %+v\nwant %+v", ch.Jumps, want)
	}
	if len(ch.Resets) != 0 {
		t.Errorf("resets = %+v, want none", ch.Resets)
	}
	if ch.Totals[Key{"eth0", PPSAllowanceExceeded}] != 8 || ch.Totals[Key{"eth1", PPSAllowanceExceeded}] != 2 {
		t.Errorf("totals = %v", ch.Totals)
	}
}

func TestDiffEmpty(t *testing.T) {
	ch := Diff(nil)
	if len(ch.Jumps)+len(ch.Resets)+len(ch.Failed)+len(ch.Gauges)+len(ch.Totals) != 0 {
		t.Errorf("changes of nothing = %+v", ch)
	}
}

func TestDiffGaugeReachingZeroIsNotFailed(t *testing.T) {
	// A connection flood fills the table: conntrack_allowance_available
	// reaches 0 while every *_exceeded is still 0 (the device lags). The
	// read is good, and its zero is the gauge's value.
	dev := func(avail, conntrack uint64) map[string]uint64 {
		return map[string]uint64{
			BwInAllowanceExceeded: 0, BwOutAllowanceExceeded: 0, PPSAllowanceExceeded: 0,
			ConntrackAllowanceExceeded: conntrack, LinklocalAllowanceExceeded: 0,
			ConntrackAllowanceAvailable: avail,
		}
	}
	samples := []record.CounterSample{
		sample(1000, dev(120, 0)),
		sample(2000, dev(0, 0)),
		sample(3000, dev(0, 0)),
		sample(4000, dev(0, 7)),
	}
	ch := Diff(samples)
	if len(ch.Failed) != 0 {
		t.Fatalf("failed = %+v, want none: the gauge reached 0 legitimately", ch.Failed)
	}
	var zeros int
	for _, g := range ch.Gauges {
		if g.Name == ConntrackAllowanceAvailable && g.Value == 0 {
			zeros++
		}
	}
	if zeros != 3 {
		t.Errorf("conntrack_allowance_available read 0 %d times, want 3", zeros)
	}
	want := []Jump{{Interface: "eth0", Name: ConntrackAllowanceExceeded, FromNs: 3100, ToNs: 4000, Delta: 7}}
	if !reflect.DeepEqual(ch.Jumps, want) {
		t.Errorf("jumps = %+v, want %+v", ch.Jumps, want)
	}
}

func TestDiffAllZeroAfterGaugesOnlyIsFailed(t *testing.T) {
	// Two gauges (the SRD mode and the conntrack allowance) zeroed at once
	// with nothing cumulative: the admin command's zeros.
	samples := []record.CounterSample{
		sample(1000, map[string]uint64{PPSAllowanceExceeded: 0, ConntrackAllowanceAvailable: 5000, SRDMode: 1}),
		sample(2000, map[string]uint64{PPSAllowanceExceeded: 0, ConntrackAllowanceAvailable: 0, SRDMode: 0}),
	}
	ch := Diff(samples)
	if len(ch.Failed) != 1 || ch.Failed[0].Reason != ReasonAllZero {
		t.Errorf("failed = %+v, want the read at 2000 as all zero", ch.Failed)
	}
}
