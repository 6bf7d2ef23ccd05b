//go:build linux

// Package tracecheck runs `enaprobe trace` as a user would, on one end of a
// veth pair in namespaces it makes, sends a known number of UDP datagrams
// through it, and checks the report counted exactly those: the kernel
// matrix's end-to-end check, in a guest or on the host.
package tracecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/enaprobe/enaprobe/internal/testutil/vethpair"
)

// Options of one check.
type Options struct {
	Enaprobe string        // the binary under test
	Packets  int           // datagrams to send
	Payload  int           // UDP payload bytes of each
	Duration time.Duration // the trace's --duration
	Deadline time.Duration // for attaching, and for the trace to end after its duration
	TempDir  string
}

// Result is what the report said, for the matrix's table.
type Result struct {
	AttachMode string
	Egress     uint64 // packets
	Owner      string // how the sender's flow was attributed, e.g. "socket pid 123"
}

type report struct {
	Trace struct {
		AttachMode string `json:"attach_mode"`
		Kernel     string `json:"kernel"`
	} `json:"trace"`
	Profile struct {
		TopFlows []struct {
			Dst   string `json:"dst"`
			Owner *struct {
				PID uint32 `json:"pid"`
				How string `json:"how"`
			} `json:"owner"`
		} `json:"top_flows"`
	} `json:"profile"`
	Totals []struct {
		Interface string `json:"interface"`
		Direction string `json:"direction"`
		Packets   uint64 `json:"packets"`
		Bytes     uint64 `json:"bytes"`
	} `json:"totals"`
}

// Run makes the pair, traces A's end for opts.Duration while A sends
// opts.Packets datagrams to B, and checks the report's totals.
func Run(opts Options) (Result, error) {
	var res Result
	pair, err := vethpair.New(vethpair.Options{Octet: 77})
	if err != nil {
		return res, fmt.Errorf("make veth pair: %w", err)
	}
	defer pair.Close()
	dst := netip.AddrPortFrom(pair.AddrB, 9000)
	var sink *net.UDPConn
	if err := vethpair.Do(pair.NSB, func() error {
		if sink, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(dst)); err != nil {
			return err
		}
		// Room for every datagram even when the reader runs late (a
		// guest under TCG): the check counts what the trace saw, and a
		// sink that dropped would make the count unprovable.
		return sink.SetReadBuffer(16 << 20)
	}); err != nil {
		return res, fmt.Errorf("listen in %s: %w", pair.NSB, err)
	}
	defer sink.Close()
	received := make(chan int, 1)
	go func() {
		buf := make([]byte, 65536)
		n := 0
		for {
			if _, _, err := sink.ReadFromUDP(buf); err != nil {
				received <- n
				return
			}
			n++
		}
	}()

	ready := filepath.Join(opts.TempDir, "trace-ready")
	_ = os.Remove(ready)
	ctx, cancel := context.WithTimeout(context.Background(), opts.Duration+2*opts.Deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", pair.NSA, opts.Enaprobe, "trace",
		"-i", pair.IfA, "--duration", opts.Duration.String(), "--no-imds", "--format", "json",
		"--ready-file", ready, "--log-level", "warn")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start enaprobe trace: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	attachBy := time.Now().Add(opts.Deadline)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-exited:
			return res, fmt.Errorf("enaprobe trace ended before attaching: %v: %s", err, lastLines(stderr.Bytes()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(attachBy) {
			cancel()
			<-exited
			return res, fmt.Errorf("enaprobe trace did not attach within %v: %s", opts.Deadline, lastLines(stderr.Bytes()))
		}
	}
	started := time.Now()
	if err := send(pair.NSA, dst, opts.Packets, opts.Payload); err != nil {
		return res, err
	}
	sent := time.Since(started)
	if err := <-exited; err != nil {
		return res, fmt.Errorf("enaprobe trace: %w: %s", err, lastLines(stderr.Bytes()))
	}
	if sent > opts.Duration/2 {
		return res, fmt.Errorf("sending took %v, too close to the trace's %v to count on it", sent, opts.Duration)
	}
	sink.Close()
	if got := <-received; got != opts.Packets {
		return res, fmt.Errorf("the sink got %d datagrams of %d sent", got, opts.Packets)
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return res, fmt.Errorf("parse the JSON report: %w", err)
	}
	res.AttachMode = rep.Trace.AttachMode
	frame := uint64(14 + 20 + 8 + opts.Payload)
	want := map[string][2]uint64{"egress": {uint64(opts.Packets), uint64(opts.Packets) * frame}, "ingress": {0, 0}}
	seen := 0
	var errs []error
	for _, t := range rep.Totals {
		if t.Interface != pair.IfA {
			continue
		}
		w, ok := want[t.Direction]
		if !ok {
			continue
		}
		seen++
		if t.Direction == "egress" {
			res.Egress = t.Packets
		}
		if t.Packets != w[0] || t.Bytes != w[1] {
			errs = append(errs, fmt.Errorf("%s %s: %d packets %d bytes, want %d and %d", t.Interface, t.Direction, t.Packets, t.Bytes, w[0], w[1]))
		}
	}
	if seen != 2 {
		errs = append(errs, fmt.Errorf("the report has %d of the 2 totals of %s", seen, pair.IfA))
	}
	// The datagrams came from this process's socket: the cgroup programs
	// (bpf/owner.c) must load and attach on this kernel and name it.
	for _, f := range rep.Profile.TopFlows {
		if f.Dst != dst.String() {
			continue
		}
		if f.Owner == nil || f.Owner.PID != uint32(os.Getpid()) || f.Owner.How != "socket" {
			errs = append(errs, fmt.Errorf("flow to %s: owner %+v, want this process (%d) by socket", dst, f.Owner, os.Getpid()))
		} else {
			res.Owner = fmt.Sprintf("%s pid %d", f.Owner.How, f.Owner.PID)
		}
	}
	if res.Owner == "" && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no top flow to %s in the report", dst))
	}
	return res, errors.Join(errs...)
}

func send(ns string, dst netip.AddrPort, n, payload int) error {
	return vethpair.Do(ns, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return fmt.Errorf("send udp: %w", err)
		}
		defer c.Close()
		buf := make([]byte, payload)
		for i := 0; i < n; i++ {
			if _, err := c.Write(buf); err != nil {
				return fmt.Errorf("send udp: %w", err)
			}
		}
		return nil
	})
}

func lastLines(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return string(b)
}
