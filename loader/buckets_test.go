//go:build linux

package loader

import (
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/bpf"
	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestBucketModeResolves: the feature probe finds pinned BPF timers on a
// kernel that has them (6.7+), so the default mode there is per CPU, and
// the shared ring everywhere else.
func TestBucketModeResolves(t *testing.T) {
	privtest.RequireRoot(t)
	got := DefaultOptions().resolved().Buckets
	release := privtest.KernelRelease(t)
	t.Logf("kernel %s: %s buckets", release, got)
	want := BucketsShared
	if privtest.KernelAtLeast(t, 6, 7) {
		want = BucketsPerCPU
	}
	if got != want {
		t.Errorf("kernel %s: the bucket mode resolved to %s, want %s", release, got, want)
	}
}

// TestFlushTimer: a CPU that sees one packet and then nothing more still
// hands its open bucket to the shared ring: with per-CPU buckets (6.7+)
// its pinned timer flushes it once the bucket has ended, and then disarms;
// the shared-ring object of older kernels, which has no timer, adds the
// packet to the ring at once.
func TestFlushTimer(t *testing.T) {
	privtest.RequireRoot(t)
	opts := testOptions()
	opts.Buckets = BucketsAuto
	opts.Bucket = time.Millisecond
	opts.BucketRing = 256 * time.Millisecond
	// Long enough that the timer is still pending when the test reads the
	// maps, even under qemu without acceleration.
	opts.FlushDelay = 100 * time.Millisecond
	perCPU := opts.resolved().Buckets == BucketsPerCPU
	tp := newTestProbe(t, opts)
	tp.clearBuckets(t)
	frame := udpFrame(t, v4A, v4B, 1000, 2000, 18)
	sent := monoclock.Now()
	if err := tp.tryRun(record.Egress, frame, 0, 0); err != nil {
		t.Fatal(err)
	}
	ring, open, armed := tp.bucketPlaces(t)
	// A read that came FlushDelay or later after the packet (a loaded
	// machine) may find the timer fired already: then only the end state
	// below is checked.
	late := time.Duration(monoclock.Now()-sent) >= opts.FlushDelay
	if !perCPU {
		if ring != 1 || open != 0 || armed {
			t.Fatalf("shared buckets, right after the packet: %d in the ring, %d open, timer armed %v; want 1 in the ring", ring, open, armed)
		}
		return
	}
	if late {
		t.Logf("the maps were read %v after the packet, past the flush delay", opts.FlushDelay)
	} else if ring+open != 1 || !armed {
		t.Fatalf("right after the packet: %d in the ring, %d open, timer armed %v; want 1 in all, armed", ring, open, armed)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(opts.Bucket + opts.FlushDelay)
		if ring, open, armed = tp.bucketPlaces(t); ring == 1 && open == 0 && !armed {
			return
		}
	}
	t.Errorf("after %v: %d in the ring, %d open, timer armed %v; want the packet flushed and the timer idle",
		2*time.Second, ring, open, armed)
}

// bucketPlaces counts the packets in the shared ring and in the CPUs' open
// buckets, and says whether any CPU's flush timer is armed.
func (tp *testProbe) bucketPlaces(t *testing.T) (ring, open uint64, armed bool) {
	t.Helper()
	m := tp.coll.Maps[bpf.ProbeMapBuckets]
	for i := uint32(0); i < m.MaxEntries(); i++ {
		var b bpf.ProbeBucket
		if err := m.Lookup(i, &b); err != nil {
			t.Fatal(err)
		}
		ring += b.Packets
	}
	var states []bpf.ProbeCpuState
	if err := tp.coll.Maps[bpf.ProbeMapCpuStates].Lookup(uint32(0), &states); err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		for _, b := range s.Open {
			open += b.Packets
		}
		armed = armed || s.TimerArmed != 0
	}
	return ring, open, armed
}

// TestNoTimerFlushesAtOnce: a CPU whose flush timer cannot start hands
// each packet to the shared ring at once instead of holding it in an open
// bucket nothing would flush. With per-CPU buckets (6.7+) the timer array
// here has no slot for CPU 1, which counts; older kernels get the object
// without timers, whose every packet goes to the ring.
func TestNoTimerFlushesAtOnce(t *testing.T) {
	privtest.RequireRoot(t)
	opts := testOptions()
	opts.Buckets = BucketsAuto
	perCPU := opts.resolved().Buckets == BucketsPerCPU
	cpu := 0
	if perCPU {
		if runtime.NumCPU() < 2 {
			privtest.Unavailable(t, "a second CPU")
		}
		cpu = 1
	}
	tp := newTestProbeFrom(t, opts, func(s *ebpf.CollectionSpec) {
		if m, ok := s.Maps[bpf.ProbePerCPUMapCpuTimers]; ok {
			m.MaxEntries = 1 // CPU 0 only
		}
	})
	tp.clearBuckets(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	frame := udpFrame(t, v4A, v4B, 1000, 2000, 18)
	for range 3 {
		if err := tp.tryRun(record.Egress, frame, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ring, open, armed := tp.bucketPlaces(t); ring != 3 || open != 0 || armed {
		t.Errorf("%s buckets: %d in the ring, %d open, timer armed %v; want 3 in the ring", opts.resolved().Buckets, ring, open, armed)
	}
}
