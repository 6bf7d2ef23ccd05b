package record_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// validRecording is a small recording that reads back and analyzes.
func validRecording() *record.Recording {
	start := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	return &record.Recording{
		Meta: record.Meta{WindowNs: 1_000_000, SampleNs: 10_000_000,
			Interfaces: []record.InterfaceInfo{{Name: "eth0"}},
			Start:      record.ClockPair{MonoNs: 5e9, Wall: start},
			End:        record.ClockPair{MonoNs: 7e9, Wall: start.Add(2 * time.Second)}},
		Series: []record.Series{{Interface: "eth0", Direction: record.Egress, WidthNs: 100_000, Buckets: []record.Bucket{
			{StartNs: 5_000_100_000, Packets: 3, Bytes: 4500}, {StartNs: 5_000_500_000, Packets: 1, Bytes: 60}}}},
		Counters: []record.CounterSample{{Interface: "eth0", BeforeNs: 5e9, AfterNs: 5e9 + 1000,
			Values: map[string]uint64{"bw_out_allowance_exceeded": 7}}},
		IMDS: []record.IMDSEvent{{Interface: "eth0", Direction: record.Ingress, TimeNs: 6e9, Kind: record.IMDSReply, TTL: 1,
			Key: record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort("169.254.169.254:80"), Dst: netip.MustParseAddrPort("10.0.0.5:41000")}}},
	}
}

// encodeJSON is the recording's file content before compression, as a map
// to edit.
func encodeJSON(t testing.TB, r *record.Recording) map[string]any {
	var buf bytes.Buffer
	if err := record.Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func gz(t testing.TB, doc []byte) io.Reader {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(doc); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestReadRejectsImplausibleRecordings: every recording is validated on
// read, with an error saying what is wrong, before the analyzer sees it.
func TestReadRejectsImplausibleRecordings(t *testing.T) {
	meta := func(m map[string]any) map[string]any { return m["meta"].(map[string]any) }
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"negative bucket", func(m map[string]any) { m["series"].([]any)[0].(map[string]any)["width_ns"] = -100000 }, "bucket width"},
		{"series of two widths", func(m map[string]any) {
			other := maps.Clone(m["series"].([]any)[0].(map[string]any))
			other["interface"], other["width_ns"] = "eth1", 200000
			m["series"] = append(m["series"].([]any), other)
		}, "one datapath"},
		{"null meta", func(m map[string]any) { m["meta"] = nil }, "no meta"},
		{"end before start", func(m map[string]any) { meta(m)["End"].(map[string]any)["MonoNs"] = 1e9 }, "before it starts"},
		{"end 1e18 ns after start", func(m map[string]any) { meta(m)["End"].(map[string]any)["MonoNs"] = 1e18 }, "not plausible"},
		{"series width 0", func(m map[string]any) { m["series"].([]any)[0].(map[string]any)["width_ns"] = 0 }, "bucket width"},
		{"bucket far away", func(m map[string]any) {
			m["series"].([]any)[0].(map[string]any)["start_delta"] = []any{50001, 4e13}
		}, "not plausible"},
		{"buckets backwards", func(m map[string]any) {
			m["series"].([]any)[0].(map[string]any)["start_delta"] = []any{50001, -3}
		}, "out of order"},
		{"read ends before it begins", func(m map[string]any) {
			m["counters"].([]any)[0].(map[string]any)["AfterNs"] = 1
		}, "ends"},
		{"reads overlap", func(m map[string]any) {
			second := maps.Clone(m["counters"].([]any)[0].(map[string]any))
			second["BeforeNs"], second["AfterNs"] = 5e9+500, 5e9+2000
			m["counters"] = append(m["counters"].([]any), second)
		}, "overlap"},
		{"direction 7", func(m map[string]any) { m["series"].([]any)[0].(map[string]any)["direction"] = 7 }, "direction"},
		{"imds event of no known kind", func(m map[string]any) { m["imds"].([]any)[0].(map[string]any)["Kind"] = 9 }, "imds event"},
		{"imds event of a udp flow", func(m map[string]any) {
			m["imds"].([]any)[0].(map[string]any)["Key"].(map[string]any)["Proto"] = 17
		}, "imds event"},
		{"imds event far away", func(m map[string]any) { m["imds"].([]any)[0].(map[string]any)["TimeNs"] = 4e18 }, "not plausible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := encodeJSON(t, validRecording())
			tc.edit(m)
			doc, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = record.Read(gz(t, doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read: %v, want an error with %q", err, tc.want)
			}
		})
	}
	doc, _ := json.Marshal(encodeJSON(t, validRecording()))
	if _, err := record.Read(gz(t, doc)); err != nil {
		t.Fatalf("the unedited recording: %v", err)
	}
}

// FuzzRead: whatever the file holds, Read returns an error or a recording
// that the analyzer can analyze without panicking.
func FuzzRead(f *testing.F) {
	doc, err := json.Marshal(encodeJSON(f, validRecording()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	f.Add([]byte(`{"format":1,"meta":null}`))
	f.Add([]byte(`{"format":1,"meta":{"BucketNs":100000,"End":{"MonoNs":1000000000000000000}}}`))
	f.Add([]byte(`{"format":1,"meta":{"BucketNs":-5},"series":[{"width_ns":1,"start_delta":[9223372036854775807,1]}]}`))
	// Amplification: structures that repeat, for the fuzzer to grow.
	f.Add([]byte(`{"format":1,"flows":[{},{},{},{},{},{},{},{}]}`))
	f.Add([]byte(`{"format":1,"series":[{"link_local":[[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]}]}`))
	f.Add([]byte(`{"format":1,"meta":{"AttachNotes":["","","",""]},"x":[[[[[[]]]]]],"counters":[{"Values":{"a":1,"b":2}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		readAndAnalyze(t, gz(t, doc))
	})
}

// FuzzReadCompressed: the same for the gzip stream itself, from a valid
// recording and from a bomb (25 million empty flows in about 71 kB, the
// file of issue 23): the fuzzer mutates what inflates, not what was
// inflated.
func FuzzReadCompressed(f *testing.F) {
	var buf bytes.Buffer
	if err := record.Write(&buf, validRecording()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	b, err := io.ReadAll(bomb(f, `{"format":1,"flows":[`, `{},`, `{}]}`, 25_000_000))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, doc []byte) {
		readAndAnalyze(t, bytes.NewReader(doc))
	})
}

func readAndAnalyze(t *testing.T, r io.Reader) {
	rec, err := record.Read(r)
	if err != nil {
		return
	}
	if err := record.Validate(rec); err != nil {
		t.Fatalf("Read returned a recording Validate rejects: %v", err)
	}
	// Analyze lays the span out densely; keep each run of the fuzzer
	// small (Validate allows far more than a fuzz iteration should
	// allocate).
	span := rec.Meta.End.MonoNs - rec.Meta.Start.MonoNs
	for _, s := range rec.Series {
		if n := len(s.Buckets); n > 0 {
			span = max(span, s.Buckets[n-1].StartNs-min(s.Buckets[0].StartNs, rec.Meta.Start.MonoNs))
		}
	}
	if span/rec.GridBucketNs() > 1<<16 || span < 0 {
		return
	}
	analyzer.Analyze(rec, analyzer.DefaultOptions())
}
