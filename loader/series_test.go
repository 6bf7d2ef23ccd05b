//go:build linux

package loader

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// TestChunkedSeries adds buckets mostly in order, with stragglers from up
// to 300 buckets back (a drain's late sweep), across many pieces: the
// series must equal one sorted, merged slice built the plain way.
func TestChunkedSeries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s chunkedSeries
	var want []record.Bucket
	next := int64(0)
	for range 5 * seriesChunk {
		start := next
		if next > 300 && rng.IntN(10) == 0 {
			start = next - 1 - rng.Int64N(300) // a straggler, maybe into an earlier piece
		} else {
			next += 1 + rng.Int64N(3) // buckets without packets are skipped
		}
		b := record.Bucket{StartNs: start, Packets: 1 + rng.Uint64N(9), Bytes: 100}
		s.add(b)
		want = mergeBucket(want, b)
	}
	got := s.all()
	if !slices.Equal(got, want) {
		t.Fatalf("series differs: %d buckets, want %d", len(got), len(want))
	}
	if len(s.chunks) < 4 {
		t.Errorf("%d pieces: the test should cross several", len(s.chunks))
	}
	if !slices.IsSortedFunc(got, func(a, b record.Bucket) int { return int(a.StartNs - b.StartNs) }) {
		t.Error("series not sorted")
	}
}
