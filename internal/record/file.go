package record

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
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
	Meta              *fileMeta          `json:"meta"`
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

// fileMeta is Meta with the bucket width, which is the series' (Recording.
// BucketNs), written for the builds that read it from here; this one
// ignores it.
type fileMeta struct {
	*Meta
	BucketNs int64 `json:",omitempty"`
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
	// Retrans is left out when every bucket's is zero: recordings made
	// before impact was measured have none.
	Retrans []uint64 `json:"retrans,omitempty"`
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
		if b.Retrans != 0 && fs.Retrans == nil {
			fs.Retrans = make([]uint64, n)
		}
		if fs.Retrans != nil {
			fs.Retrans[i] = b.Retrans
		}
	}
	return fs
}

// Write encodes r to w in the recording file format.
func Write(w io.Writer, r *Recording) error {
	f := fileRecording{Format: FormatVersion, Meta: &fileMeta{Meta: &r.Meta, BucketNs: r.BucketNs()}, Flows: r.Flows, Owners: r.Owners, Windows: r.Windows, IMDS: r.IMDS, LinkLocalPayloads: r.LinkLocalPayloads,
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

// Read decodes a recording written by Write, within the bounds of
// decode.go: a file beyond them is refused with a *BoundError before it
// takes more than MaxRecordingBytes of memory.
func Read(rd io.Reader) (*Recording, error) {
	cr := &countingReader{r: rd}
	zr, err := gzip.NewReader(bufio.NewReader(cr))
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	defer zr.Close()
	d := newDecoder(zr, cr)
	f, err := d.decodeFile()
	if err != nil {
		return nil, fmt.Errorf("decode recording: %w", err)
	}
	if f.Format < 1 || f.Format > FormatVersion {
		return nil, fmt.Errorf("recording format %d not supported (this build reads up to %d)", f.Format, FormatVersion)
	}
	if f.Meta == nil {
		return nil, errNoMeta
	}
	r := &f.Recording
	r.Meta = *f.Meta
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
