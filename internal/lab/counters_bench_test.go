package lab

import (
	"context"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// BenchmarkCountersRead measures one read of every emulated counter, the
// cost a sampler pays per sample.
func BenchmarkCountersRead(b *testing.B) {
	l, err := upForBench(b)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	src := l.Counters()
	for b.Loop() {
		if _, err := src.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

func upForBench(b *testing.B) (*Lab, error) {
	b.Helper()
	privtest.RequireRoot(b)
	return Up(context.Background(), Config{})
}
