//go:build linux

package capture

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// runIn runs a capture inside the pair's namespace A in the background.
func runIn(t *testing.T, ctx context.Context, pair *vethpair.Pair, cfg Config) (<-chan *record.Recording, <-chan struct{}) {
	t.Helper()
	out := make(chan *record.Recording, 1)
	attached := make(chan struct{})
	cfg.Attached = func() { close(attached) }
	go func() {
		var rec *record.Recording
		err := vethpair.Do(pair.NSA, func() (err error) {
			rec, err = Run(ctx, cfg)
			return err
		})
		if err != nil {
			t.Errorf("capture: %+v", err)
		}
		out <- rec
	}()
	select {
	case <-attached:
	case <-time.After(10 * time.Second):
		t.Fatal("capture did not attach within 10 s")
	}
	return out, attached
}

func TestCaptureRecording(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 21})
	cfg := DefaultConfig()
	cfg.Interfaces = []string{pair.IfA}
	cfg.Duration = 1500 * time.Millisecond
	done, _ := runIn(t, context.Background(), pair, cfg)

	const n = 300
	err := vethpair.Do(pair.NSA, func() error {
		// Unconnected: nobody listens, and the port unreachable answers
		// must not fail the writes.
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		dst := netip.AddrPortFrom(pair.AddrB, 9999)
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDPAddrPort(make([]byte, 64), dst); err != nil {
				return err
			}
			if i%30 == 0 {
				time.Sleep(50 * time.Millisecond) // spread over several drains and snapshots
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := <-done
	if rec == nil {
		t.Fatal("no recording")
	}
	m := rec.Meta
	if len(m.Interfaces) != 1 || m.Interfaces[0].Name != pair.IfA || m.Interfaces[0].Driver != "veth" || m.Interfaces[0].ENA {
		t.Errorf("interfaces %+v", m.Interfaces)
	}
	if m.AttachMode != "tcx" || m.CounterSource != "none" || m.End.MonoNs-m.Start.MonoNs < int64(cfg.Duration) {
		t.Errorf("meta %+v", m)
	}
	var egress record.Totals
	for _, tt := range rec.Totals {
		if tt.Direction == record.Egress {
			egress = tt
		}
	}
	if egress.Packets[record.ClassUDP] != n {
		t.Errorf("egress udp packets %d, want %d", egress.Packets[record.ClassUDP], n)
	}
	var inBuckets uint64
	for _, s := range rec.Series {
		if s.Direction == record.Egress {
			for _, b := range s.Buckets {
				inBuckets += b.Packets
			}
		}
	}
	if inBuckets != egress.SumPackets() {
		t.Errorf("buckets hold %d packets, totals %d", inBuckets, egress.SumPackets())
	}
	// Several snapshots of the one flow, cumulative and increasing.
	var last uint64
	snaps := 0
	for _, f := range rec.Flows {
		if f.Key.Dst.Port() != 9999 {
			continue
		}
		if f.Packets < last {
			t.Errorf("snapshot went down: %d after %d", f.Packets, last)
		}
		last = f.Packets
		snaps++
	}
	if snaps < 3 || last != n {
		t.Errorf("%d snapshots ending at %d packets; want several ending at %d", snaps, last, n)
	}
	assertDetached(t, pair)
}

// TestCaptureCancel ends a trace early, as Ctrl-C does: the recording is
// still returned and nothing stays attached.
func TestCaptureCancel(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 22})
	cfg := DefaultConfig()
	cfg.Interfaces = []string{pair.IfA}
	cfg.Duration = time.Minute
	cfg.Attach = "tc"
	// Cancel once the trace has run: after its first progress report.
	ran := make(chan struct{})
	var once sync.Once
	cfg.Progress = func(Progress) { once.Do(func() { close(ran) }) }
	ctx, cancel := context.WithCancel(context.Background())
	done, _ := runIn(t, ctx, pair, cfg)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress within 10 s of attaching")
	}
	cancel()
	select {
	case rec := <-done:
		if rec == nil || rec.Meta.AttachMode != "tc" {
			t.Fatalf("recording after cancel: %+v", rec)
		}
		if d := time.Duration(rec.Meta.End.MonoNs - rec.Meta.Start.MonoNs); d > 10*time.Second {
			t.Errorf("trace lasted %v after cancel", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("capture did not end within 10 s of cancel")
	}
	assertDetached(t, pair)
}

func assertDetached(t *testing.T, pair *vethpair.Pair) {
	t.Helper()
	if left, err := pair.Leftovers(); err != nil || left != "" {
		t.Errorf("after the trace: %v\n%s", err, left)
	}
}

// TestCaptureStaysFirst: a program that drops everything is attached at
// the head of ingress during the trace, as a CNI agent restarting would.
// The trace moves back ahead of it within its check interval, says so live
// and in the recording, and counts every packet sent after that.
func TestCaptureStaysFirst(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 22})
	cfg := DefaultConfig()
	cfg.Interfaces = []string{pair.IfA}
	cfg.Duration = 0
	cfg.AnchorInterval = 20 * time.Millisecond
	notices := make(chan string, 16)
	cfg.Notice = func(m string) {
		select {
		case notices <- m:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, _ := runIn(t, ctx, pair, cfg)

	drop, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "cni_drop", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer drop.Close()
	var l link.Link
	if err := vethpair.Do(pair.NSA, func() error {
		ifc, err := net.InterfaceByName(pair.IfA)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: drop, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	select {
	case m := <-notices:
		if !strings.Contains(m, "moved back to the head") || !strings.Contains(m, "cni_drop") {
			t.Fatalf("notice %q", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trace did not move back to the head within 10 s")
	}
	const n = 200
	err = vethpair.Do(pair.NSB, func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDPAddrPort(make([]byte, 64), netip.AddrPortFrom(pair.AddrA, 9999)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	rec := <-done
	if rec == nil {
		t.Fatal("no recording")
	}
	if len(rec.Meta.AttachNotes) != 1 || !strings.Contains(rec.Meta.AttachNotes[0], "moved back to the head") {
		t.Errorf("recording's attach notes %q", rec.Meta.AttachNotes)
	}
	var got uint64
	for _, tt := range rec.Totals {
		if tt.Interface == pair.IfA && tt.Direction == record.Ingress {
			got = tt.Packets[record.ClassUDP]
		}
	}
	if got != n {
		t.Errorf("ingress udp packets %d, want the %d sent through the drop program after the move", got, n)
	}
}

// TestSetUpGivesRefresh: the refresh a trace is given (--counter-refresh)
// reaches the interface's counter sampler, which places its extra reads
// by it; none given, the sampler learns it from the changes.
func TestSetUpGivesRefresh(t *testing.T) {
	pair := vethpair.ForTest(t, vethpair.Options{Octet: 23})
	counters := filepath.Join(t.TempDir(), "counters.txt")
	if err := os.WriteFile(counters, []byte("NIC statistics:\n     bw_out_allowance_exceeded: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, refresh := range []time.Duration{0, 700 * time.Millisecond} {
		cfg := DefaultConfig()
		cfg.Interfaces = []string{pair.IfA}
		cfg.CounterSources = map[string]ena.Source{pair.IfA: ena.NewFileSource(counters)}
		cfg.CounterRefresh = refresh
		err := vethpair.Do(pair.NSA, func() error {
			ti, err := setUp(cfg, pair.IfA)
			if err != nil {
				return err
			}
			defer func() {
				if err := ti.close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			if ti.sampler == nil {
				return errors.New("no counter sampler for an interface given a counter source")
			}
			if got := ti.sampler.Refresh(); got != refresh {
				t.Errorf("sampler's refresh %v, given %v", got, refresh)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	assertDetached(t, pair)
}
