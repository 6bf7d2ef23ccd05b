package loader

import (
	"time"

	"github.com/enaprobe/enaprobe/internal/knobs"
)

// The datapath's time knobs (their one home is package knobs, which the
// analyzer shares without importing the loader).
const (
	MinBucket     = knobs.MinBucket     // narrowest time bucket
	MaxBucket     = knobs.MaxBucket     // widest time bucket
	DefaultBucket = knobs.DefaultBucket // time bucket unless told otherwise
	DefaultWindow = knobs.DefaultWindow // fine window unless told otherwise
)

type (
	// A BucketError is a bucket width outside MinBucket to MaxBucket.
	BucketError = knobs.BucketError
	// A WindowError is a fine window that is not positive, or that Load
	// was given unrounded.
	WindowError = knobs.WindowError
)

// CheckKnobs checks a bucket width and a fine window asked for together
// and returns the window the datapath and the analysis use: a whole number
// of buckets, at least one, the request rounded up. Its errors are a
// *BucketError or a *WindowError.
func CheckKnobs(bucket, window time.Duration) (time.Duration, error) {
	return knobs.Check(bucket, window)
}

// FineWindow is the window CheckKnobs makes of a bucket width (0: unknown)
// and a window without checking them: for a recording's, checked when it
// was recorded.
func FineWindow(bucket, window time.Duration) time.Duration {
	return knobs.Window(bucket, window)
}
