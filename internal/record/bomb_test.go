package record_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"
	"unsafe"

	"github.com/enaprobe/enaprobe/internal/record"
)

// bomb is gzip of head, then body n times, then tail: a small stream that
// inflates to far more. It is compressed as it is read, so a reader that
// stops early costs only what it read.
func bomb(t testing.TB, head, body, tail string, n int) io.Reader {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pr.Close() })
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestCompression)
		chunk := []byte(strings.Repeat(body, max(1, 1<<16/len(body))))
		per := len(chunk) / len(body)
		if _, err := io.WriteString(zw, head); err != nil {
			pw.CloseWithError(err)
			return
		}
		for left := n; left > 0; left -= per {
			if _, err := zw.Write(chunk[:min(left, per)*len(body)]); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		io.WriteString(zw, tail)
		pw.CloseWithError(zw.Close())
	}()
	return pr
}

// TestReadRefusesBombs: a file that inflates far beyond what a recording
// holds is refused with a *BoundError naming the part of the file, before
// it takes more than the recording's memory bound.
func TestReadRefusesBombs(t *testing.T) {
	const meta = `{"format":1,"meta":{"BucketNs":100000,"Start":{"MonoNs":0},"End":{"MonoNs":1000000000}},`
	for _, tc := range []struct {
		name             string
		head, body, tail string
		n                int
		field            string
	}{
		// The file of the issue: 25 million empty flows in about 71 kB.
		{"empty flows", `{"format":1,"flows":[`, `{},`, `{}]}`, 25_000_000, "flows"},
		{"flows after meta", meta + `"flows":[`, `{"Interface":"eth0"},`, `{}]}`, 10_000_000, "flows"},
		{"counter samples", meta + `"counters":[`, `{},`, `{}]}`, 25_000_000, "counters"},
		{"zero column", meta + `"series":[{"width_ns":100000,"start_delta":[`, `0,`, `0]}]}`, 200_000_000, "start_delta"},
		{"link-local column", meta + `"series":[{"width_ns":100000,"link_local":[[`, `0,`, `0]]}]}`, 200_000_000, "link_local"},
		{"many series", meta + `"series":[`, `{"width_ns":1},`, `{}]}`, 10_000_000, "series"},
		{"long interface name", meta + `"flows":[{"Interface":"`, `e`, `"}]}`, 100_000_000, "flows"},
		{"long note", `{"format":1,"meta":{"AttachNotes":["`, `x`, `"]}}`, 100_000_000, "meta"},
		{"many notes", `{"format":1,"meta":{"AttachNotes":[`, `"",`, `""]}}`, 30_000_000, "meta"},
		{"unknown field", meta + `"future":[`, `[],`, `[]]}`, 100_000_000, "recording"},
		{"whitespace", meta + `"flows":[`, ` `, `]}`, 500_000_000, "flows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := record.Read(bomb(t, tc.head, tc.body, tc.tail, tc.n))
			var be *record.BoundError
			if !errors.As(err, &be) {
				t.Fatalf("Read of a file inflating to %d bytes: %v, want a *record.BoundError", len(tc.head)+tc.n*len(tc.body), err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
			t.Log(err)
		})
	}
}

// TestFullRecorderReadsBack: a recording of as many flow snapshots as
// serve's flight recorder may hold at its largest --recorder-bytes (the
// record type that costs decoding most) reads back within the bound.
func TestFullRecorderReadsBack(t *testing.T) {
	rec := validRecording()
	n := int(record.MaxRecorderBytes / int64(unsafe.Sizeof(record.FlowSnapshot{})))
	rec.Flows = make([]record.FlowSnapshot, n)
	for i := range rec.Flows {
		rec.Flows[i] = record.FlowSnapshot{TimeNs: 6e9, Interface: "eth0", FlowStats: record.FlowStats{Packets: uint64(i)}}
	}
	var buf bytes.Buffer
	if err := record.Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	got, err := record.Read(&buf)
	if err != nil {
		t.Fatalf("%d flows: %v", n, err)
	}
	if len(got.Flows) != n {
		t.Fatalf("read %d flows of %d", len(got.Flows), n)
	}
}
