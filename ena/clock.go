package ena

import "golang.org/x/sys/unix"

// MonotonicNow reads CLOCK_MONOTONIC in nanoseconds: the clock of
// bpf_ktime_get_ns(), so counter samples line up with what the eBPF programs
// stamped. Go's time.Now() monotonic reading has another origin and cannot be
// used for this.
func MonotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// Linux always has CLOCK_MONOTONIC; a zero or stale time would
		// silently misplace every sample, so fail loudly instead.
		panic("ena: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
