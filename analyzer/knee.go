package analyzer

import (
	"math"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// kneeRange is the lag of a cluster whose counter went on counting after
// its cause ended, read with no refresh: a queue counted as it drains (the
// lab's tbf counts each held-back dequeue, for 500 ms after a 14 ms burst)
// or what waited behind the cause dropped. The first jump alone (bound:
// the drops begun no earlier than the traffic, by its end) leaves the lag
// anywhere over the read interval before it: 0 to 12 ms, stated 6, where
// the lab's was 0; 5.6 to 41.5 ms, stated 23.5, where it was 30.5.
//
// While the cause's traffic was shown, the counter rose at its packets'
// rate; after, at the drain's, far lower. The read interval where the
// count's rate fell holds the traffic's end, shown that lag later: the
// last interval whose rate was three times the drain's or more, or a later
// one whose rate was over every drain read's and half again their mean (a
// sender starved of CPU sent its burst's tail sparse: in the read after
// the fall, 1.6 times the drain's rate, and that interval, left out, put
// the range 4 ms short of the lab's lag). Where no read after the first
// jump's stood out, the fall was in the first. The fall is where the
// cause's dense part ended (denseEnd), up to its sparse tail before its
// end: the range reaches that much later. The range a read interval
// wide is narrowed where the traffic tells the counts (kneeFit). This
// says nothing of how the device counts a queue, only that it counts
// slower once the traffic that filled it ended. ok is false where the
// count did not fall, or the drain was not read for two reads.
func (a *analysis) kneeRange(cluster []counters.Jump, s span, val func(int) float64, perDrop float64, bound lagRange, readNs int64) (lagRange, bool) {
	if len(cluster) < 3 || perDrop <= 0 || s.hi <= s.lo {
		return lagRange{}, false
	}
	end := a.g.startNs(s.hi)
	mids := make([][2]int64, len(cluster)) // each jump's reads' middles: before, showing
	for k, j := range cluster {
		from, to := a.certain(j)
		mids[k] = [2]int64{(from + j.FromNs) / 2, (j.ToNs + to) / 2}
	}
	// The drain's rate, from the jumps read wholly after any lag in bound
	// could show the cause's traffic, and the highest of its reads'.
	var drained, drainMost float64
	var drainFrom, drainTo int64 = -1, 0
	for k, m := range mids {
		if m[0] < end+bound.to+readNs {
			continue
		}
		if drainFrom < 0 {
			drainFrom = m[0]
		}
		drained += float64(cluster[k].Delta)
		drainMost = max(drainMost, float64(cluster[k].Delta)/float64(m[1]-m[0]))
		drainTo = m[1]
		if drainTo-drainFrom >= kneeDrainSpan {
			break
		}
	}
	if drainFrom < 0 || drainTo-drainFrom < 2*readNs {
		return lagRange{}, false
	}
	rate := drained / float64(drainTo-drainFrom) // counts per ns
	w := a.g.widthNs                             // the traffic's end, known to a window
	// The count fell in the last interval before the drain whose rate
	// stood far out of the drain's (the first jump's, where none after it
	// did), or in a later one whose rate stood out of every drain read's
	// and well above their mean: a sender starved of CPU sent its burst's
	// tail sparse. None stood out: the cause's own count no faster than
	// the drain's, no fall. The first jump may hold only the cause's head
	// (a 24 ms burst's first 32 counts, read as it began: d3/quiet).
	from0, to0 := a.certain(cluster[0])
	fell := float64(cluster[0].Delta) > kneeFall*rate*float64(to0-max(from0, a.g.startNs(s.lo)))
	first, last := 0, 0
	for k := 1; k < len(cluster) && mids[k][0] < end+bound.to+readNs; k++ {
		r := float64(cluster[k].Delta) / float64(mids[k][1]-mids[k][0])
		if r > kneeFall*rate {
			first, fell = k, true
		}
		if r > drainMost && r > kneeNoise*rate {
			last = k
		}
	}
	if !fell {
		return lagRange{}, false
	}
	br := bound
	if first > 0 {
		from, _ := a.certain(cluster[first])
		br.from = max(br.from, from-end-w)
	}
	_, to := a.certain(cluster[max(first, last)])
	br.to = min(br.to, to-a.g.startNs(denseEnd(val, s))+w)
	if br.from > br.to {
		return lagRange{}, false
	}
	if r, ok := a.kneeFit(cluster, mids, s, val, perDrop, rate, br, readNs); ok {
		return r, true
	}
	return br, true
}

// denseEnd is the end of the last window of s whose traffic over its level
// was at least half the median of its windows': where the cause's count
// fell, a sparse tail after it counted little more than a drain does.
func denseEnd(val func(int) float64, s span) int {
	half := (medianOver(val, s.lo, s.hi, s.level) - s.level) / 2
	if half <= 0 {
		return s.hi
	}
	for i := s.hi - 1; i >= s.lo; i-- {
		if val(i)-s.level >= half {
			return i + 1
		}
	}
	return s.hi
}

// kneeFit narrows a knee's range br where the cause's traffic tells the
// counts of the jumps after the first: under a lag, each counts the
// cause's packets over the level between its reads, shifted by the lag,
// and the drain's rate after the traffic's end (where the cause's bucket
// ran dry, before the first jump's read, does not matter). The range is
// the lags whose counts fit about as well as the best's. ok is false
// where even the best leaves more than kneeMisfit of them unexplained: a
// device that counts some packets more than once (beside load, the lab's
// tbf counted 1.5 times the burst's packets, and the best fit lay 8 ms
// past the lab's lag, outside the fall's read interval).
func (a *analysis) kneeFit(cluster []counters.Jump, mids [][2]int64, s span, val func(int) float64, perDrop, rate float64, br lagRange, readNs int64) (lagRange, bool) {
	end, w := a.g.startNs(s.hi), a.g.widthNs
	// With no allowance known, the allowance lies under the level the
	// cause stood out from, anywhere: a burst far over it counts about all
	// its packets (over the level, the lab's 2 MB burst's were 45% of
	// them, and a lag of 0 was stated as 2.8 to 7 ms).
	level := s.level
	if !overAllowance(s) {
		level = 0
	}
	// over is the cause's packets over level from t1 to t2 (ns).
	over := func(t1, t2 int64) float64 {
		t1, t2 = max(t1, a.g.startNs(s.lo)), min(t2, end)
		n := 0.0
		for t1 < t2 {
			i := a.g.index(t1)
			next := min(a.g.startNs(i)+w, t2)
			n += max(val(i)-level, 0) * float64(next-t1) / float64(w)
			t1 = next
		}
		return n / perDrop
	}
	last := 1
	for last < len(cluster) && mids[last][0] <= end+br.to+readNs {
		last++
	}
	var fitted float64
	for _, j := range cluster[1:last] {
		fitted += float64(j.Delta)
	}
	errAt := func(lag int64) float64 {
		e := 0.0
		for k := 1; k < last; k++ {
			from, to := mids[k][0]-lag, mids[k][1]-lag
			pred := over(from, to) + rate*float64(max(to-max(from, end), 0))
			e += math.Abs(pred - float64(cluster[k].Delta))
		}
		return e
	}
	step := max(w/4, (br.to-br.from)/kneeSteps, 1)
	best, bestErr := int64(-1), math.Inf(1)
	var lags []int64
	var errs []float64
	for lag := br.from; lag <= br.to; lag += step {
		e := errAt(lag)
		lags, errs = append(lags, lag), append(errs, e)
		if e < bestErr {
			best, bestErr = lag, e
		}
	}
	if best < 0 || last < 2 || bestErr > kneeMisfit*fitted {
		return lagRange{}, false
	}
	// Within half a drain read's count of the best: the drain's own
	// count varies that much from read to read.
	tol := max(rate*float64(readNs)/2, 1)
	r := lagRange{best, best}
	for k, e := range errs {
		if e <= bestErr+tol {
			r.from, r.to = min(r.from, lags[k]), max(r.to, lags[k])
		}
	}
	// Widened by the traffic's end, known to a window, and by how long the
	// fitted reads took: each read's middle stands for it.
	widen := w
	for _, j := range cluster[1:last] {
		from, to := a.certain(j)
		widen = max(widen, (j.FromNs-from)/2+w, (to-j.ToNs)/2+w)
	}
	return lagRange{max(r.from-widen, br.from), min(r.to+widen, br.to)}, true
}

const (
	kneeDrainSpan = 50e6 // ns of the drain's reads its rate is taken over
	kneeNoise     = 1.5  // a read's rate over the drain's, at least, to hold some of the cause
	kneeFall      = 3    // an interval's rate over the drain's, at least, to hold the cause
	kneeMisfit    = 0.25 // the counts the best lag leaves unexplained, at most
	kneeSteps     = 400  // lags kneeFit tries over its range, at most
)
