package ena

import (
	"testing"
)

// atDepth calls fn under depth extra small frames, so the
// reads below start at every stack depth, many of them right where the
// next call grows (moves) the goroutine's stack.
//
//go:noinline
func atDepth(depth int, fn func()) byte {
	var pad [40]byte
	if depth > 0 {
		pad[depth%len(pad)] = atDepth(depth-1, fn)
		return pad[0]
	}
	fn()
	return pad[1]
}

// TestEthtoolSourceStackMoves is a regression test for ioctl requests whose
// data pointer goes stale when the stack moves before the system call, as in
// github.com/safchain/ethtool v0.7.0: there the kernel writes the stat count
// into the old stack, the read sees 0 statistics and returns an empty map.
func TestEthtoolSourceStackMoves(t *testing.T) {
	p := newVethPair(t)
	src := sourceIn(t, p.nsA, p.linkA)
	want, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	for depth := range 400 {
		done := make(chan int)
		go atDepth(depth, func() {
			v, err := src.Read()
			if err != nil {
				t.Error(err)
			}
			done <- len(v)
		})
		if got := <-done; got != len(want) {
			t.Fatalf("read at depth %d: %d statistics, want %d", depth, got, len(want))
		}
	}
}
