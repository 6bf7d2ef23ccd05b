package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/enaprobe/enaprobe/internal/monoclock"
)

// TCPBulkSpec is one TCP flow moving data as fast as it can.
type TCPBulkSpec struct {
	// Download makes the VPC peer send to the instance (inbound); by
	// default the instance sends (outbound).
	Download bool
	Duration time.Duration
	// Dst defaults to PeerAddr; the port is always BulkPort.
	Dst netip.Addr
}

// TCPBulkResult is what the receiver got, and over how long: from its
// first byte to its last.
type TCPBulkResult struct {
	Bytes   uint64
	Elapsed time.Duration
	// WritesNs are when an upload paced by the application had its
	// writes taken (monotonic): when it was sending, which a stall of the
	// process (descheduled beside a busy core) leaves a gap in.
	WritesNs []int64
}

// Bps is the receiver's rate, bit/s.
func (r TCPBulkResult) Bps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) * 8 / r.Elapsed.Seconds()
}

// bulkSndBuf fixes the sender's send buffer, both ways (the kernel doubles
// it): far above the bandwidth-delay product of the lab's rates, small
// enough that draining it after the last write takes a fraction of a
// second even when ten flows share 40 Mbit/s (autotuning would grow it to
// megabytes, seconds of drain behind a cap).
const bulkSndBuf = 128 << 10

// drainGrace bounds the wait for the last bytes after the planned end.
const drainGrace = 10 * time.Second

// TCPBulk runs one bulk TCP flow to or from the VPC peer.
func (l *Lab) TCPBulk(ctx context.Context, spec TCPBulkSpec) (TCPBulkResult, error) {
	if err := checkDuration(spec.Duration); err != nil {
		return TCPBulkResult{}, fmt.Errorf("tcp bulk: %w", err)
	}
	if !spec.Dst.IsValid() {
		spec.Dst = PeerAddr
	}
	c, err := l.DialInstance(ctx, "tcp", netip.AddrPortFrom(spec.Dst, BulkPort).String())
	if err != nil {
		return TCPBulkResult{}, fmt.Errorf("tcp bulk: %w", err)
	}
	defer c.Close()
	end := time.Now().Add(spec.Duration)
	// Closing the connection on cancel unblocks any read or write.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var res TCPBulkResult
	if spec.Download {
		res, err = download(c.(*net.TCPConn), spec.Duration, end)
	} else {
		res, err = upload(c.(*net.TCPConn), end)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("tcp bulk: %w", ctx.Err())
	}
	if err != nil {
		return res, fmt.Errorf("tcp bulk: %w", err)
	}
	return res, nil
}

func upload(c *net.TCPConn, end time.Time) (TCPBulkResult, error) {
	return uploadAt(c, end, 0)
}

// uploadAt is upload with the application pacing its writes to bps (0:
// as fast as the socket takes them): each write what is due since the
// start, at most 20 ms behind (a write the socket held back does not
// turn into a burst after it).
func uploadAt(c *net.TCPConn, end time.Time, bps uint64) (TCPBulkResult, error) {
	if err := c.SetWriteBuffer(bulkSndBuf); err != nil {
		return TCPBulkResult{}, err
	}
	if _, err := c.Write([]byte{bulkUpload}); err != nil {
		return TCPBulkResult{}, err
	}
	// The write deadline ends the stream at the planned end.
	c.SetWriteDeadline(end)
	buf := make([]byte, 64<<10)
	start, sent := time.Now(), 0.0
	var writes []int64
	for {
		chunk := buf
		if bps > 0 {
			now := time.Now()
			due := float64(bps) / 8 * now.Sub(start).Seconds()
			sent = max(sent, due-float64(bps)/8*0.02)
			if due-sent < 1448 {
				if !now.Before(end) {
					break
				}
				time.Sleep(time.Millisecond)
				continue
			}
			chunk = buf[:min(len(buf), int(due-sent))]
			sent += float64(len(chunk))
		}
		if _, err := c.Write(chunk); err != nil {
			if time.Now().Before(end) {
				return TCPBulkResult{}, err
			}
			break
		}
		if bps > 0 {
			writes = append(writes, monoclock.Now())
		}
	}
	if err := c.CloseWrite(); err != nil {
		return TCPBulkResult{}, err
	}
	c.SetReadDeadline(time.Now().Add(drainGrace))
	var reply [16]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return TCPBulkResult{}, fmt.Errorf("read receiver's tally: %w", err)
	}
	return TCPBulkResult{
		Bytes:    binary.BigEndian.Uint64(reply[0:]),
		Elapsed:  time.Duration(binary.BigEndian.Uint64(reply[8:])),
		WritesNs: writes,
	}, nil
}

func download(c *net.TCPConn, d time.Duration, end time.Time) (TCPBulkResult, error) {
	var req [9]byte
	req[0] = bulkDownload
	binary.BigEndian.PutUint64(req[1:], uint64(d))
	if _, err := c.Write(req[:]); err != nil {
		return TCPBulkResult{}, err
	}
	c.SetReadDeadline(end.Add(drainGrace))
	var res TCPBulkResult
	var first, last time.Time
	buf := make([]byte, 256<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if res.Bytes == 0 {
				first = time.Now()
			}
			res.Bytes += uint64(n)
			last = time.Now()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
	}
	res.Elapsed = last.Sub(first)
	return res, nil
}
