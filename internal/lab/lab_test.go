package lab

import (
	"context"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// upLab builds a lab for one test and closes it when the test ends.
func upLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	privtest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// readCounters reads every lab counter now (ReadCounters), failing the
// test on error.
func readCounters(t *testing.T, l *Lab) map[string]uint64 {
	t.Helper()
	v, err := l.ReadCounters()
	if err != nil {
		t.Fatalf("read counters: %v", err)
	}
	return v
}

// delta is after minus before for one counter.
func delta(before, after map[string]uint64, name string) int64 {
	return int64(after[name]) - int64(before[name])
}

func TestUpReadsAllCounters(t *testing.T) {
	l := upLab(t, Config{})
	v := readCounters(t, l)
	for _, name := range CounterNames {
		if _, ok := v[name]; !ok {
			t.Errorf("counter %s missing", name)
		}
	}
	if got, want := v[counters.ConntrackAllowanceAvailable], uint64(l.Config().ConntrackMax); got != want {
		t.Errorf("%s = %d on an idle lab, want %d", counters.ConntrackAllowanceAvailable, got, want)
	}
	t.Logf("%v", v)
}
