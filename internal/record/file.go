package record

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
)

// FormatVersion is the version of the recording file format. A reader
// refuses a file of a newer major version.
const FormatVersion = 1

// The file is gzip-compressed JSON. Bucket series, the bulk of a trace
// (300,000 buckets per interface and direction for 30 s at 100 µs), are
// stored as delta-encoded columns so that gzip squeezes them well and the
// file stays readable with standard tools (zcat | jq).
type fileRecording struct {
	Format            int                `json:"format"`
	Meta              *Meta              `json:"meta"`
	Series            []fileSeries       `json:"series"`
	Flows             []FlowSnapshot     `json:"flows"`
	Owners            []FlowOwner        `json:"owners,omitempty"`
	Windows           []WindowEvent      `json:"windows"`
	IMDS              []IMDSEvent        `json:"imds,omitempty"`
	LinkLocalPayloads []LinkLocalPayload `json:"link_local_payloads,omitempty"`
	Sizes             []SizeSlice        `json:"sizes"`
	Totals            []Totals           `json:"totals"`
	Loss              []Loss             `json:"loss"`
	Counters          []CounterSample    `json:"counters"`
}

type fileSeries struct {
	Interface string    `json:"interface"`
	Direction Direction `json:"direction"`
	WidthNs   int64     `json:"width_ns"`
	// StartDelta holds bucket indexes (StartNs/WidthNs), each as the
	// difference from the previous one.
	StartDelta []int64               `json:"start_delta"`
	Packets    []uint64              `json:"packets"`
	Bytes      []uint64              `json:"bytes"`
	SYNs       []uint64              `json:"syns"`
	LinkLocal  [NumServices][]uint64 `json:"link_local"`
}

func toFileSeries(s Series) fileSeries {
	n := len(s.Buckets)
	fs := fileSeries{Interface: s.Interface, Direction: s.Direction, WidthNs: s.WidthNs,
		StartDelta: make([]int64, n), Packets: make([]uint64, n), Bytes: make([]uint64, n), SYNs: make([]uint64, n)}
	for i := range fs.LinkLocal {
		fs.LinkLocal[i] = make([]uint64, n)
	}
	var prev int64
	for i, b := range s.Buckets {
		idx := b.StartNs / max(s.WidthNs, 1)
		fs.StartDelta[i] = idx - prev
		prev = idx
		fs.Packets[i], fs.Bytes[i], fs.SYNs[i] = b.Packets, b.Bytes, b.SYNs
		for j := range fs.LinkLocal {
			fs.LinkLocal[j][i] = b.LinkLocal[j]
		}
	}
	return fs
}

func (fs fileSeries) series() (Series, error) {
	n := len(fs.StartDelta)
	if len(fs.Packets) != n || len(fs.Bytes) != n || len(fs.SYNs) != n {
		return Series{}, fmt.Errorf("series %s %s: columns of different lengths", fs.Interface, fs.Direction)
	}
	for _, c := range fs.LinkLocal {
		if len(c) != n {
			return Series{}, fmt.Errorf("series %s %s: link-local column of length %d, want %d", fs.Interface, fs.Direction, len(c), n)
		}
	}
	if fs.WidthNs <= 0 || fs.WidthNs > maxBucketNs {
		return Series{}, fmt.Errorf("series %s %s: bucket width %d ns, want 1 ns to 1 s", fs.Interface, fs.Direction, fs.WidthNs)
	}
	s := Series{Interface: fs.Interface, Direction: fs.Direction, WidthNs: fs.WidthNs, Buckets: make([]Bucket, n)}
	var idx int64
	limit := math.MaxInt64 / fs.WidthNs
	for i := range s.Buckets {
		d := fs.StartDelta[i]
		if d < 0 && i > 0 || d > limit || d < -limit || idx+d > limit || idx+d < -limit {
			return Series{}, fmt.Errorf("series %s %s: bucket %d out of order or out of range", fs.Interface, fs.Direction, i)
		}
		idx += d
		b := &s.Buckets[i]
		b.StartNs = idx * fs.WidthNs
		b.Packets, b.Bytes, b.SYNs = fs.Packets[i], fs.Bytes[i], fs.SYNs[i]
		for j := range b.LinkLocal {
			b.LinkLocal[j] = fs.LinkLocal[j][i]
		}
	}
	return s, nil
}

// Write encodes r to w in the recording file format.
func Write(w io.Writer, r *Recording) error {
	f := fileRecording{Format: FormatVersion, Meta: &r.Meta, Flows: r.Flows, Owners: r.Owners, Windows: r.Windows, IMDS: r.IMDS, LinkLocalPayloads: r.LinkLocalPayloads,
		Sizes: r.Sizes, Totals: r.Totals, Loss: r.Loss, Counters: r.Counters}
	for _, s := range r.Series {
		f.Series = append(f.Series, toFileSeries(s))
	}
	zw := gzip.NewWriter(w)
	if err := json.NewEncoder(zw).Encode(&f); err != nil {
		return fmt.Errorf("encode recording: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress recording: %w", err)
	}
	return nil
}

// Read decodes a recording written by Write.
func Read(rd io.Reader) (*Recording, error) {
	zr, err := gzip.NewReader(bufio.NewReader(rd))
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	defer zr.Close()
	var f fileRecording
	if err := json.NewDecoder(zr).Decode(&f); err != nil {
		return nil, fmt.Errorf("decode recording: %w", err)
	}
	if f.Format < 1 || f.Format > FormatVersion {
		return nil, fmt.Errorf("recording format %d not supported (this build reads up to %d)", f.Format, FormatVersion)
	}
	if f.Meta == nil {
		return nil, errNoMeta
	}
	r := &Recording{Meta: *f.Meta, Flows: f.Flows, Owners: f.Owners, Windows: f.Windows, IMDS: f.IMDS, LinkLocalPayloads: f.LinkLocalPayloads, Sizes: f.Sizes,
		Totals: f.Totals, Loss: f.Loss, Counters: f.Counters}
	for _, fs := range f.Series {
		s, err := fs.series()
		if err != nil {
			return nil, fmt.Errorf("decode recording: %w", err)
		}
		r.Series = append(r.Series, s)
	}
	if err := Validate(r); err != nil {
		return nil, fmt.Errorf("invalid recording: %w", err)
	}
	return r, nil
}

// WriteFile writes r to path.
func WriteFile(path string, r *Recording) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create recording %s: %w", path, err)
	}
	if err := Write(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write recording %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close recording %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a recording from path.
func ReadFile(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording %s: %w", path, err)
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("read recording %s: %w", path, err)
	}
	return r, nil
}
