// Package knobs holds the datapath's time knobs, which the loader, the
// commands and the analyzer share: the bucket's range and default, the fine
// window's default, and the rule that ties the window to the bucket. It is
// pure Go so that the analyzer applies the rule without importing the
// loader; everything else takes these through package loader.
package knobs

import (
	"fmt"
	"time"
)

const (
	// MinBucket and MaxBucket bound the time bucket's width: below 10 µs a
	// bucket ring the collector can drain holds too little time, above
	// 10 ms a bucket no longer tells a micro-burst from its neighbours.
	MinBucket = 10 * time.Microsecond
	MaxBucket = 10 * time.Millisecond
	// DefaultBucket is the time bucket's width unless told otherwise.
	DefaultBucket = 100 * time.Microsecond
	// DefaultWindow is the fine window findings are located with.
	DefaultWindow = time.Millisecond
)

// A BucketError is a bucket width outside MinBucket to MaxBucket.
type BucketError struct{ Bucket time.Duration }

func (e *BucketError) Error() string {
	return fmt.Sprintf("bucket width %v out of range: %v to %v", e.Bucket, MinBucket, MaxBucket)
}

// A WindowError is a fine window that is not positive, or (from a caller
// that must not change it) not the window Window makes of it.
type WindowError struct{ Window, Bucket time.Duration }

func (e *WindowError) Error() string {
	if e.Window <= 0 {
		return fmt.Sprintf("fine window %v: must be positive", e.Window)
	}
	return fmt.Sprintf("fine window %v is not a whole number of %v buckets (%v is)", e.Window, e.Bucket, Window(e.Bucket, e.Window))
}

// Window is the fine window a bucket of width bucket makes of the one
// asked for: a whole number of buckets, at least one, the request rounded
// up, so that no bucket straddles two windows. A bucket width of 0
// (unknown) leaves the window as it is.
func Window(bucket, window time.Duration) time.Duration {
	if bucket <= 0 {
		return window
	}
	if window < bucket {
		return bucket
	}
	if r := window % bucket; r != 0 {
		window += bucket - r
	}
	return window
}

// Check checks a bucket width and a fine window asked for together, and
// returns the window to use, Window of them; the errors are a *BucketError
// or a *WindowError.
func Check(bucket, window time.Duration) (time.Duration, error) {
	if bucket < MinBucket || bucket > MaxBucket {
		return 0, &BucketError{Bucket: bucket}
	}
	if window <= 0 {
		return 0, &WindowError{Window: window, Bucket: bucket}
	}
	return Window(bucket, window), nil
}
