// Package monoclock reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns():
// every ...Ns instant of a recording, the counter samples and the lab's
// generator timestamps are on it, so they line up with what the eBPF
// programs stamped. Go's time.Now() monotonic reading has another origin
// and cannot be used for this.
package monoclock

import "golang.org/x/sys/unix"

// Now returns CLOCK_MONOTONIC in nanoseconds. clock_gettime fails only for
// an unknown clock or a bad pointer, neither possible here on Linux; a zero
// time would silently misplace every sample, so a failure panics instead.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
