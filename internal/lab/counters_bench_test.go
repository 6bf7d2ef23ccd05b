package lab

import (
	"context"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// BenchmarkCountersRead measures one read of every emulated counter: a
// trace's (Counters, the cost a sampler pays per sample, the tracked
// connections counted in the background) and an exact one (ReadCounters,
// which counts them in the read).
func BenchmarkCountersRead(b *testing.B) {
	l, err := upForBench(b)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.Run("trace", func(b *testing.B) {
		src := l.Counters()
		for b.Loop() {
			if _, err := src.Read(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.ReadCounters(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func upForBench(b *testing.B) (*Lab, error) {
	b.Helper()
	privtest.RequireRoot(b)
	return Up(context.Background(), Config{})
}
