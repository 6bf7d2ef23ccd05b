package ena

import (
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

func TestReplaySourceFollowsTheRecordedTimeline(t *testing.T) {
	const ms = int64(1e6)
	rec := &record.Recording{Counters: []record.CounterSample{
		{Interface: "eth0", BeforeNs: 1000 * ms, AfterNs: 1000*ms + 50, Values: map[string]uint64{"bw_out_allowance_exceeded": 1}},
		{Interface: "eth1", BeforeNs: 1005 * ms, Values: map[string]uint64{"bw_out_allowance_exceeded": 99}},
		{Interface: "eth0", BeforeNs: 1010 * ms, Values: map[string]uint64{"bw_out_allowance_exceeded": 5}},
		{Interface: "eth0", BeforeNs: 1020 * ms, Err: "admin queue timeout"},
		{Interface: "eth0", BeforeNs: 1030 * ms, Values: map[string]uint64{"bw_out_allowance_exceeded": 9}},
	}}
	now := int64(50_000 * ms)
	src, err := NewReplaySource(rec, "eth0", func() int64 { return now })
	if err != nil {
		t.Fatal(err)
	}
	if src.Kind() != "replay" {
		t.Errorf("kind %q", src.Kind())
	}
	for _, c := range []struct {
		afterMs int64
		want    uint64
		fails   bool
	}{{0, 1, false}, {9, 1, false}, {10, 5, false}, {15, 5, false}, {21, 0, true}, {30, 9, false}, {500, 9, false}} {
		now = 50_000*ms + c.afterMs*ms
		v, err := src.Read()
		if c.fails {
			if err == nil {
				t.Errorf("+%d ms: the recorded failed read replayed as values %v", c.afterMs, v)
			}
			continue
		}
		if err != nil || v["bw_out_allowance_exceeded"] != c.want {
			t.Errorf("+%d ms: %v, %v; want %d", c.afterMs, v, err, c.want)
		}
	}
	if got := RecordedInterfaces(rec); len(got) != 2 || got[0] != "eth0" || got[1] != "eth1" {
		t.Errorf("recorded interfaces %v", got)
	}
	if _, err := NewReplaySource(rec, "eth7", nil); err == nil {
		t.Error("replay of an interface without samples")
	}
}
