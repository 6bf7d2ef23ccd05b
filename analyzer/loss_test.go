package analyzer

import (
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestReadFailuresSummarised: reads that keep failing the same way are one
// row with a count (a wrong counters file gave one row per sample).
func TestReadFailuresSummarised(t *testing.T) {
	rec := &record.Recording{Meta: record.Meta{
		Start: record.ClockPair{MonoNs: 1e9, Wall: time.Unix(1e9, 0)}, End: record.ClockPair{MonoNs: 3e9, Wall: time.Unix(1e9+2, 0)}}}
	for i := range 200 {
		at := int64(1e9 + i*10e6)
		rec.Counters = append(rec.Counters, record.CounterSample{Interface: "eth0", BeforeNs: at, AfterNs: at + 1000,
			Err: "parse ethtool statistics: no statistics found"})
	}
	l := Analyze(rec, DefaultOptions()).Loss
	if l.CounterReadFailures != 200 || len(l.ReadFailures) != 1 {
		t.Fatalf("%d failures in %d rows, want 200 in 1: %+v", l.CounterReadFailures, len(l.ReadFailures), l.ReadFailures)
	}
	if f := l.ReadFailures[0]; f.Count != 200 || f.OffsetS != 0 || f.LastOffsetS < 1.98 {
		t.Errorf("row %+v, want 200 reads from +0 to +1.99 s", f)
	}
}
