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
		return bucketStart(series(v), span{lo: x, hi: y, level: level}, d, 1, 10), x
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
	t.Run("burst paused before it emptied the bucket", func(t *testing.T) {
		// A bunch the bucket absorbs (40 kB over), 15 kB short of full
		// 5 windows after it, then a burst whose first window (50 kB over)
		// empties it only with the bunch's help, a pause of 2 windows
		// (more than bridge), and its rest, which empties a full bucket
		// alone 3 windows after the first drop.
		v := make([]float64, 40)
		v[10] = level + 40e3
		v[16] = level + 50e3
		for i := 19; i < 30; i++ {
			v[i] = level + 40e3
		}
		start, kadane := at(v, depth)
		if kadane != 10 || firstDrop(series(v), 10, 30, level, depth) != 16 || firstDrop(series(v), 16, 30, level, depth) != 19 {
			t.Fatal("the case's premise: the span from the bunch, its first drop in the burst's first window, 3 windows sooner than without the bunch")
		}
		if start != 16 {
			t.Errorf("bucketStart = %d, want the burst's first window, 16", start)
		}
		if start := bucketStart(series(v), span{lo: 10, hi: 30, level: level}, depth, 1, 2); start != 10 {
			t.Errorf("the rest emptying the bucket 3 windows after the first drop, bucketStart within 2 = %d, want the span's start, 10", start)
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

func TestQueuedBehind(t *testing.T) {
	const level = 5e3
	// A burst 100 kB over the level in windows 0 and 1, then a flow at
	// 3 kB a window: its excess drains at 2 kB a window, for 50 windows.
	v := make([]float64, 200)
	v[0], v[1] = level+50e3, level+50e3
	for i := 2; i < len(v); i++ {
		v[i] = 3e3
	}
	// The flow's bunch 40 windows on, while the queue still drains, and
	// one 150 windows on, after it emptied.
	v[40], v[150] = level+40e3, level+40e3
	burst := span{lo: 0, hi: 2, level: level}
	if !queuedBehind(series(v), burst, 40) {
		t.Error("the bunch 40 windows on did not wait behind the burst: 24 kB still draining")
	}
	if queuedBehind(series(v), burst, 150) {
		t.Error("the bunch 150 windows on waited behind the burst, whose queue had drained by 52 (and the bunch's own by 72)")
	}
	// Traffic at the level or over it between: an overshoot going on,
	// not a queue draining.
	over := append([]float64(nil), v...)
	for i := 2; i < 40; i++ {
		over[i] = level + 1e3
	}
	if queuedBehind(series(over), burst, 40) {
		t.Error("traffic over the level after the burst was taken for its queue draining")
	}

	// queuedTail cuts the span at the bunch: a span over the level
	// that holds both (the gap's deficit, 2 kB a window, less than the
	// burst's excess) ends with the burst.
	s := span{lo: 0, hi: 41, level: level}
	if got := queuedTail(series(v), s, 10); got.lo != 0 || got.hi != 2 {
		t.Errorf("queuedTail = [%d, %d), want the burst's [0, 2)", got.lo, got.hi)
	}
	// A pause within the merge gap is the burst's own.
	paused := append([]float64(nil), v...)
	paused[5] = level + 50e3
	if got := queuedTail(series(paused), span{lo: 0, hi: 6, level: level}, 10); got.hi != 6 {
		t.Errorf("queuedTail = [%d, %d), want all of [0, 6): a 3-window pause is within the gap", got.lo, got.hi)
	}
}

func TestBuiltOver(t *testing.T) {
	v := []float64{0, 0, 0, 0, 4500, 4500}
	if got := builtOver(series(v), span{lo: 3, hi: 6, level: 4000}); got != -4000+500+500 {
		t.Errorf("builtOver = %.0f, want the sum over the level, under it too", got)
	}
}

// TestIncidentStart: outbound, the bucket the run shows is taken one
// window's refill deeper, as a bunch's build is known to a window's only
// (s36/dg1): a bunch as large as one that passed, built 1.5 kB more in
// one window than that one did split over two, is not where the burst 6
// windows after it began. Inbound, where the host sees what the bucket
// let through, the depth shown is taken as it is.
func TestIncidentStart(t *testing.T) {
	const level, depth = 4.5e3, 22.8e3
	a := &analysis{g: grid{widthNs: 1e6}, opt: DefaultOptions()}
	v := make([]float64, 60)
	v[10] = 28.8e3 // built 24.3 kB, over the depth shown by 1.5 kB
	for i := 16; i < 40; i++ {
		v[i] = 40e3
	}
	s := span{lo: 10, hi: 40, level: level}
	if got := a.incidentStart(series(v), s, depth, true); got != 16 {
		t.Errorf("outbound: incidentStart = %d, want the burst's first window, 16", got)
	}
	if got := a.incidentStart(series(v), s, depth, false); got != 10 {
		t.Errorf("inbound: incidentStart = %d, want the bunch's window, 10: the depth shown taken as it is", got)
	}
}
