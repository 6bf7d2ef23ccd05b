package analyzer

import "testing"

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
