package monoclock

import (
	"testing"
	"time"
)

func TestNow(t *testing.T) {
	a := Now()
	time.Sleep(10 * time.Millisecond)
	b := Now()
	if a <= 0 || b-a < int64(10*time.Millisecond) {
		t.Errorf("Now %d then %d after sleeping 10ms", a, b)
	}
	// Far below an hour: the clock is nanoseconds, not something coarser.
	if b-a > int64(time.Hour) {
		t.Errorf("10ms sleep measured as %v", time.Duration(b-a))
	}
	prev := Now()
	for range 1000 {
		now := Now()
		if now < prev {
			t.Fatalf("went back from %d to %d", prev, now)
		}
		prev = now
	}
}
