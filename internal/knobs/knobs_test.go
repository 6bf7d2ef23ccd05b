package knobs

import (
	"errors"
	"testing"
	"time"
)

const us = time.Microsecond

func TestWindow(t *testing.T) {
	for _, c := range []struct{ bucket, window, want time.Duration }{
		{100 * us, 1000 * us, 1000 * us},                                 // a whole number of buckets: kept
		{100 * us, 150 * us, 200 * us},                                   // rounded up
		{10 * time.Millisecond, time.Millisecond, 10 * time.Millisecond}, // raised to one bucket
		{0, 150 * us, 150 * us},                                          // bucket unknown
	} {
		if got := Window(c.bucket, c.window); got != c.want {
			t.Errorf("Window(%v, %v) = %v, want %v", c.bucket, c.window, got, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	var be *BucketError
	var we *WindowError
	for _, b := range []time.Duration{MinBucket - 1, MaxBucket + 1, 0} {
		if _, err := Check(b, DefaultWindow); !errors.As(err, &be) {
			t.Errorf("Check(%v, %v) = %v, want a *BucketError", b, DefaultWindow, err)
		}
	}
	for _, w := range []time.Duration{0, -time.Millisecond} {
		if _, err := Check(DefaultBucket, w); !errors.As(err, &we) {
			t.Errorf("Check(%v, %v) = %v, want a *WindowError", DefaultBucket, w, err)
		}
	}
	if w, err := Check(MaxBucket, DefaultWindow); err != nil || w != MaxBucket {
		t.Errorf("Check(%v, %v) = %v, %v; want %v", MaxBucket, DefaultWindow, w, err, MaxBucket)
	}
	if w, err := Check(DefaultBucket, DefaultWindow); err != nil || w != DefaultWindow {
		t.Errorf("the defaults: Check = %v, %v; want %v", w, err, DefaultWindow)
	}
}
