package analyzer

import "testing"

// series is val per fine window over a slice.
func series(v []float64) func(int) float64 { return func(i int) float64 { return v[i] } }

func TestAbsorbedDepth(t *testing.T) {
	const level = 5e3
	v := make([]float64, 40)
	watched := make([]uint8, len(v))
	for i := range watched {
		watched[i] = watchedQuiet
	}
	// A quiet bunch over two windows builds up its excess over both.
	v[5], v[6] = level+20e3, level+15e3
	// A larger one where the counter moved says nothing of the bucket.
	v[20] = level + 90e3
	for i := 18; i < 24; i++ {
		watched[i] = watchedMoved
	}
	// Nor does one where nobody watched.
	v[30] = level + 80e3
	watched[30] = watchedUnknown
	if got, want := absorbedDepth(series(v), watched, level), 35e3; got != want {
		t.Errorf("absorbedDepth = %.0f, want %.0f: the quiet bunch's excess", got, want)
	}
}

func TestBucketStart(t *testing.T) {
	const level, depth = 5e3, 60e3
	at := func(v []float64, d float64) (start, kadane int) {
		x, y, ok := excessSpan(series(v), 0, len(v), level)
		if !ok {
			t.Fatal("no span over the level")
		}
		return bucketStart(series(v), span{lo: x, hi: y, level: level}, d, 1), x
	}
	t.Run("burst after an absorbed bunch", func(t *testing.T) {
		// A bunch the bucket absorbs (50 kB over), 5 windows of refill
		// short of full, then a burst that empties it in its first
		// window, with a pause of one window in it.
		v := make([]float64, 40)
		v[10] = level + 50e3
		for i := 16; i < 26; i++ {
			v[i] = 200e3
		}
		v[18] = 0
		start, kadane := at(v, depth)
		if kadane != 10 {
			t.Fatalf("the span over the level starts at %d, want the bunch's window, 10: the case's premise", kadane)
		}
		if start != 16 {
			t.Errorf("bucketStart = %d, want the burst's first window, 16", start)
		}
		if start, _ := at(v, 0); start != 10 {
			t.Errorf("with no depth learned, bucketStart = %d, want the span's start, 10", start)
		}
	})
	t.Run("overshoot in ticks", func(t *testing.T) {
		// Ticks 30 kB over, one window in five: each absorbed alone, the
		// bucket short by 10 kB more after each, empty at the sixth.
		v := make([]float64, 60)
		for i := 0; i < len(v); i += 5 {
			v[i] = level + 30e3
		}
		if e := firstDrop(series(v), 0, len(v), level, depth); e < 0 {
			t.Fatal("the ticks never emptied the bucket: the case's premise")
		}
		if start, _ := at(v, depth); start != 0 {
			t.Errorf("bucketStart = %d, want the first tick's window, 0", start)
		}
	})
	t.Run("never dry", func(t *testing.T) {
		v := make([]float64, 20)
		v[3] = level + 50e3
		if start, _ := at(v, depth); start != 3 {
			t.Errorf("bucketStart = %d, want the span's start, 3", start)
		}
	})
}
