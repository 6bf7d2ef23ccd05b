package analyzer

import (
	"slices"
	"testing"
)

func TestPausedStart(t *testing.T) {
	const level = 50.0
	v := make([]float64, 40)
	for _, i := range []int{8, 9, 14, 15, 20, 21, 22} { // two runs before s, each 4 windows short of the next
		v[i] = 100
	}
	v[2] = 100 // 6 windows before the run at 8: beyond the gap
	s := span{lo: 20, hi: 23, level: level}
	if got := pausedStart(series(v), s, 0, 5); got != 8 {
		t.Errorf("pausedStart = %d, want 8: the runs at 14 and 8 are each within 5 windows of the next", got)
	}
	if got := pausedStart(series(v), s, 12, 5); got != 14 {
		t.Errorf("pausedStart = %d, want 14: not back past the floor", got)
	}
	if got := pausedStart(series(v), s, 0, 3); got != 20 {
		t.Errorf("pausedStart = %d, want 20: the run before ends 4 windows back, past a gap of 3", got)
	}
}

// TestPausedStartSplit: a part of the burst before the sender's pause that
// came as two windows, each under the level and together over it (the
// lab's micro-burst: 61.5 and 64.1 kB against 64.9), is the burst's start;
// a window under the level beside nothing over half of it is not.
func TestPausedStartSplit(t *testing.T) {
	const level = 64.9
	v := make([]float64, 20)
	v[5], v[6] = 61.5, 64.1 // the first part, split
	v[9], v[10], v[11] = 53, 129.9, 2
	s := span{lo: 10, hi: 11, level: level}
	if got := pausedStart(series(v), s, 0, 5); got != 5 {
		t.Errorf("pausedStart = %d, want 5: the first part split between windows 5 and 6", got)
	}
	if got := pausedStart(series(v), s, 6, 5); got != 9 {
		t.Errorf("pausedStart = %d, want 9: window 6 alone (its pair lies past the floor) is under the level", got)
	}
	v[5] = 20 // a bunch under the level, beside too little to make one
	if got := pausedStart(series(v), s, 0, 5); got != 9 {
		t.Errorf("pausedStart = %d, want 9: 64.1 beside 20 is under the level", got)
	}
}

// TestShapedHead: inbound, the host sees a burst as its head and then the
// device's queue sending at the allowance; a download's bunch before it,
// the windows between empty, passed the bucket whole and is not the
// burst's (the lab's impact-inbound: 41 kB, 1 to 3 ms of nothing, the
// head of 17 and 27 kB, then 4.9 kB a millisecond against 5).
func TestShapedHead(t *testing.T) {
	const level = 5e3
	v := make([]float64, 40)
	v[5] = 41e3
	v[9], v[10] = 17e3, 27e3
	for i := 11; i < 30; i++ {
		v[i] = 4.9e3
	}
	v[20], v[21] = 2.4e3, 7.3e3 // the host's softirq batching two windows
	if got, ok := shapedHead(series(v), 5, 30, level); !ok || got != 9 {
		t.Errorf("shapedHead = %d (%v), want the head's first window, 9", got, ok)
	}
	v[6], v[7], v[8] = 3e3, 2e3, 2e3 // no gap: the bunch led into the head
	if got, _ := shapedHead(series(v), 5, 30, level); got != 5 {
		t.Errorf("shapedHead = %d, want 5: nothing under a quarter of the level between bunch and head", got)
	}
	w := make([]float64, 40)
	w[5], w[12] = 41e3, 60e3
	for i := 13; i < 16; i++ {
		w[i] = 4.9e3 // too short a stretch to be a queue's
	}
	if got, ok := shapedHead(series(w), 5, 30, level); ok {
		t.Errorf("shapedHead = %d, found a queue sending in 3 windows at the allowance, under shapedRun", got)
	}
	if queuedStretch(series(w), 12, 16) {
		t.Error("queuedStretch: 3 windows after the peak taken for a queue sending")
	}
	if !queuedStretch(series(v), 9, 30) {
		t.Error("queuedStretch: the head and 19 windows at the allowance not taken for a queue sending")
	}
	if queuedStretch(series(v), 5, 6) {
		t.Error("queuedStretch: a lone bunch taken for a queue sending")
	}
}

func TestQueueBegan(t *testing.T) {
	v := make([]float64, 40)
	v[9], v[10] = 17e3, 27e3 // the head, split between two windows
	for i := 11; i < 30; i++ {
		v[i] = 4.9e3
	}
	if got, ok := queueBegan(series(v), 9, 30); !ok || got != 12 {
		t.Errorf("queueBegan = %d (%v), want 12: the queue had begun by the end of the first window at its rate", got, ok)
	}
	v[11] = 12e3 // the head's tail, over the queue's rate
	if got, _ := queueBegan(series(v), 9, 30); got != 13 {
		t.Errorf("queueBegan = %d, want 13: the head ended in window 11", got)
	}
	v[10], v[11] = 0, 35e3 // the head split by the host's batching, an empty window between
	if got, _ := queueBegan(series(v), 9, 30); got != 13 {
		t.Errorf("queueBegan = %d, want 13: the head's second part in window 11", got)
	}
	v[25] = 80e3 // a download's bunch later on, topping the head
	if got, _ := queueBegan(series(v), 9, 30); got != 13 {
		t.Errorf("queueBegan = %d, want 13: a later bunch is not the head", got)
	}
	w := make([]float64, 40)
	w[5] = 60e3 // a bunch the bucket let through whole
	if got, ok := queueBegan(series(w), 5, 30); ok {
		t.Errorf("queueBegan = %d, found a queue behind a lone bunch", got)
	}
}

// TestShapedParts: an inbound burst whose sender paused between parts, as
// the host saw it (the lab's impact-inbound-parts, kB per 1 ms window):
// from its flow's first window on, the burst's, where that window stands
// out of the rate the device's queue sent the located part at and no
// pause under a quarter of it lasts longer than MergeGap (10 ms).
func TestShapedParts(t *testing.T) {
	a := &analysis{g: grid{widthNs: 1e6}, opt: DefaultOptions()}
	const q = 4.9 // the queue's rate, kB per window
	parts := []float64{48.6, q, q, 6, 0, 0, 0, 14.5, 0, 0, 0, 0, 0, 0, 0, 44.9, q, q, q, q, 0, 0, 0, 0, 0}
	last := []float64{30.9, q, q, q, q, q, q, q, q, q, q, q, q, q, q, 5.3}
	for _, c := range []struct {
		name   string
		series []float64
		want   bool
	}{
		{"four parts", append(append([]float64{}, parts...), last...), true},
		{"a pause longer than MergeGap", append(append(append([]float64{}, parts[:7]...), make([]float64, 11)...), last...), false},
		{"a first window under the queue's head", append(append([]float64{q, q}, parts[1:]...), last...), false},
	} {
		val := func(i int) float64 {
			if i < 0 || i >= len(c.series) {
				return 0
			}
			return c.series[i] * 1e3
		}
		lo := len(c.series) - len(last)
		if got := a.shapedParts(val, 0, span{lo: lo, hi: len(c.series)}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestQueuedPart: over an allowance given (4.5 kB a 1 ms window, 90% of
// 40 Mbit/s), a burst's 64 kB head and then the device's queue at the
// allowance, and 12 ms after it a download's catch-up, 50 kB a window for
// 8 windows, that carries more over the level and passed whole: the
// burst's part is the cause. Where no part shows a queue, or the part
// located shows one, the located span stands; a download steady at about
// the allowance after one bunch, carrying less over the level than under
// it, is no cause.
func TestQueuedPart(t *testing.T) {
	a := &analysis{g: grid{widthNs: 1e6}, opt: DefaultOptions()}
	const level = 4.5e3
	locate := func(v []float64) span {
		return a.queuedPart(series(v), 0, len(v), a.locate(series(v), 0, len(v), level1("burst_allowance", level)))
	}
	v := make([]float64, 80)
	v[10], v[11] = 40e3, 24e3
	for i := 12; i < 32; i++ {
		v[i] = 5e3
	}
	for i := 44; i < 52; i++ {
		v[i] = 50e3
	}
	if s := a.locate(series(v), 0, len(v), level1("burst_allowance", level)); s.lo != 44 {
		t.Fatalf("located [%d, %d): the catch-up, carrying more over the level, no longer located first (the case's premise)", s.lo, s.hi)
	}
	if s := locate(v); s.lo != 10 || s.hi != 32 {
		t.Errorf("queuedPart [%d, %d), want the burst's head and queue, [10, 32)", s.lo, s.hi)
	}
	w := slices.Clone(v)
	for i := 12; i < 32; i++ {
		w[i] = 0 // the burst's bunch passed whole: no queue anywhere
	}
	if s := locate(w); s.lo != 44 || s.hi != 52 {
		t.Errorf("queuedPart [%d, %d) where no part shows a queue, want the located catch-up, [44, 52)", s.lo, s.hi)
	}
	d := slices.Clone(w)
	for i := 63; i < 80; i++ {
		d[i] = 4e3 // a download at about the allowance, mostly under the level
	}
	d[63], d[67], d[71], d[75] = 4.8e3, 4.6e3, 4.6e3, 4.6e3
	if s := locate(d); s.lo != 44 || s.hi != 52 {
		t.Errorf("queuedPart [%d, %d), want the catch-up, [44, 52): the download at about the allowance carries less over the level than under it", s.lo, s.hi)
	}
}

// level1 is one level of name at perWindow a fine window.
func level1(name string, perWindow float64) level {
	return level{name: name, perWindow: perWindow, perSecond: perWindow * 1e3}
}
