//go:build linux

package loader

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
	"github.com/enaprobe/enaprobe/internal/record"
)

// windowTestWidth is the fine window of TestWindowEvents: wide enough that
// the frames of one phase, sent by BPF_PROG_TEST_RUN in microseconds, land
// in one window even on a loaded machine.
const windowTestWidth = 200 * time.Millisecond

// TestWindowEvents drives the heavy-flow path end to end: emit_window in
// the datapath, the collector's reading of closed windows from the flow
// table, and its de-duplication of the two.
//
//   - H moves exactly HeavyBytes in window w0 (the threshold is inclusive
//     and counts wire bytes), then one packet in w1; L moves one frame less
//     than HeavyBytes in w0, so it never makes an event.
//   - Between the windows the table is read twice, so H's closed window is
//     found there first (twice), and then again through the ring buffer
//     when H's packet in w1 closes it in the datapath: one event.
//   - D is heavy in w0 and in w1: two events, for two windows of one flow.
func TestWindowEvents(t *testing.T) {
	const k = 8 // frames that make a heavy window
	frameOf := func(port uint16) ([]byte, record.FlowKey) {
		src := net.IPv4(10, 9, 0, byte(port))
		key := record.FlowKey{Proto: 17,
			Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte(src.To4())), port),
			Dst: netip.AddrPortFrom(netip.AddrFrom4([4]byte(v4B.To4())), 443)}
		return udpFrame(t, src, v4B, port, 443, 1000), key
	}
	heavyFrame, heavy := frameOf(1)
	lightFrame, light := frameOf(2)
	twiceFrame, twice := frameOf(3)

	opts := testOptions()
	opts.Window = windowTestWidth
	opts.HeavyBytes = uint64(k * len(heavyFrame)) // wire bytes: the whole Ethernet frame
	f := newFlowTableProbe(t, opts)

	w0 := startOfWindow(t)
	f.send(t, heavyFrame, k)
	f.send(t, lightFrame, k-1)
	f.send(t, twiceFrame, k)
	inWindow(t, w0, "sending the first window's frames")

	w1 := w0 + int64(windowTestWidth)
	now := waitUntil(t, w1)
	for range 2 {
		if err := f.col.SnapshotFlows(now); err != nil {
			t.Fatal(err)
		}
	}
	f.send(t, heavyFrame, 1)
	f.send(t, twiceFrame, k)
	inWindow(t, w1, "sending the second window's frames")
	if err := f.col.Drain(monoclock.Now(), false); err != nil {
		t.Fatal(err)
	}

	w2 := w1 + int64(windowTestWidth)
	waitUntil(t, w2) // w1 closed: Finish reads it from the table
	r := f.finish(t)

	names := map[record.FlowKey]string{heavy: "H", light: "L", twice: "D"}
	want := map[string]int{"H w0 8 packets": 1, "D w0 8 packets": 1, "D w1 8 packets": 1}
	got := map[string]int{}
	for _, w := range r.Windows {
		got[fmt.Sprintf("%s w%d %d packets", names[w.Key], (w.StartNs-w0)/int64(windowTestWidth), w.Packets)]++
		if w.Bytes != w.Packets*uint64(len(heavyFrame)) || w.WidthNs != int64(windowTestWidth) || w.Direction != record.Egress {
			t.Errorf("window event %+v: want %d wire bytes a packet, width %v, egress", w, len(heavyFrame), windowTestWidth)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("window events (flow, window, packets: times reported; L moved %d of the %d bytes that make a window heavy):\n got %v\nwant %v",
			(k-1)*len(lightFrame), opts.HeavyBytes, got, want)
	}
}

// startOfWindow waits until a fine window of windowTestWidth has just begun
// and returns its start, so a test's frames all fall into it.
func startOfWindow(t *testing.T) int64 {
	t.Helper()
	w := int64(windowTestWidth)
	for deadline := time.Now().Add(3 * windowTestWidth); time.Now().Before(deadline); {
		now := monoclock.Now()
		if now%w < w/10 {
			return now - now%w
		}
		time.Sleep(time.Duration(w - now%w)) // to the next window's start
	}
	t.Fatal("no fine window began within three windows")
	return 0
}

// waitUntil polls the monotonic clock until it reaches at (bounded) and
// returns the time read.
func waitUntil(t *testing.T, at int64) int64 {
	t.Helper()
	deadline := time.Now().Add(2 * windowTestWidth)
	for {
		now := monoclock.Now()
		if now >= at {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("clock at %d, still before %d", now, at)
		}
		time.Sleep(time.Duration(at - now))
	}
}

// inWindow fails the test when the clock already left the window that
// began at start: the frames just sent may have straddled two windows.
func inWindow(t *testing.T, start int64, what string) {
	t.Helper()
	if d := time.Duration(monoclock.Now() - start); d >= windowTestWidth {
		t.Fatalf("%s took until %v into a window of %v: the machine is too loaded for this test", what, d, windowTestWidth)
	}
}
