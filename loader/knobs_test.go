//go:build linux

package loader

import (
	"errors"
	"testing"
	"time"
)

// TestSpecChecksKnobs: the loader refuses a bucket out of range and a
// window the caller has not rounded to whole buckets, with the typed errors
// the commands turn into usage errors.
func TestSpecChecksKnobs(t *testing.T) {
	opts := DefaultOptions()
	opts.Bucket = MaxBucket + time.Millisecond
	var be *BucketError
	if _, err := Spec(opts); !errors.As(err, &be) {
		t.Errorf("bucket %v: %v, want a *BucketError", opts.Bucket, err)
	}
	opts = DefaultOptions()
	opts.Window = opts.Bucket * 5 / 2
	var we *WindowError
	if _, err := Spec(opts); !errors.As(err, &we) {
		t.Errorf("window %v of %v buckets: %v, want a *WindowError", opts.Window, opts.Bucket, err)
	}
	opts.Window, _ = CheckKnobs(opts.Bucket, opts.Window)
	if _, err := Spec(opts); err != nil {
		t.Errorf("window %v from CheckKnobs: %v", opts.Window, err)
	}
}
