package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// Bounds of what Read decodes. A recording is a file anyone may hand to
// analyze (a bundle copied off a node, a file edited by hand, a file made to
// hurt), and JSON in gzip amplifies: 71 kB of gzip can hold 25 million empty
// flows ("{}," each, 150 bytes each once decoded). So Read decodes one
// record at a time and charges each to a memory budget before the next, and
// counts what the gzip stream gives out.
const (
	// MaxRecordingBytes bounds the memory a decoded recording may take,
	// estimated as serve's flight recorder estimates what it holds (the
	// records' own sizes, their strings, a counter sample's map entries),
	// and with what decoding holds on the way: an array of records is
	// copied as it grows (the old array and one a quarter larger are held
	// at once, 2.25 times the records). Serve's --recorder-bytes may be at
	// most MaxRecorderBytes, so whatever serve writes reads back; a trace's
	// recording is what the trace held in memory. 160 MiB keeps analyze,
	// with the garbage collector's headroom, within about 250 MiB whatever
	// the input (TestAnalyzeDecompressionBomb).
	MaxRecordingBytes = 160 << 20
	// MaxRecorderBytes is the most serve's flight recorder may hold.
	MaxRecorderBytes = MaxRecordingBytes * 2 / 5
	// maxDecompressedBytes bounds the inflated JSON: the wordiest records
	// (a flow snapshot, about 300 bytes of JSON for 152 in memory) take
	// about twice their memory in JSON, so a recording within
	// MaxRecordingBytes takes well under 1 GiB; past it only the time
	// spent inflating would grow.
	maxDecompressedBytes = 1 << 30
	// maxInflation bounds the ratio of decoded to compressed bytes beyond
	// the first inflationFloor bytes. Deflate reaches about 1032:1 on runs
	// of one byte; the recordings in testdata inflate 31:1 to 68:1 (the
	// delta-encoded columns are mostly small numbers), so 256:1 leaves them
	// four times the room and stops a bomb after a few MiB.
	maxInflation   = 256
	inflationFloor = 16 << 20
	// maxMetaBytes bounds the meta object in JSON: a few hundred bytes
	// plus one line per interface and per note.
	maxMetaBytes = 1 << 20
	// maxRecordJSON bounds one record of an array (a flow, a counter
	// sample with its few hundred names, an owner's cgroup path).
	maxRecordJSON = 64 << 10
	// maxSeries bounds the series: one per interface and direction; a
	// host with more than 256 traced interfaces is not one enaprobe is
	// for.
	maxSeries = 2 * 256
	// structureJSON is what a key or a bracket may take.
	structureJSON = 4 << 10
)

// BoundError is a recording that exceeds one of Read's bounds: Field names
// the part of the file, Bound what it exceeded.
type BoundError struct {
	Field string
	Bound string
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("%s: exceeds %s: not a recording enaprobe writes (a decompression bomb, or damaged)", e.Field, e.Bound)
}

// countingReader counts the compressed bytes the gzip reader took.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// boundedReader gives the JSON decoder the inflated stream within the
// bounds: the whole stream's size and inflation, and the current value's
// allowance (json.Decoder buffers a whole value before decoding it, so the
// allowance bounds that buffer and what the value decodes to).
type boundedReader struct {
	r          io.Reader
	compressed *countingReader
	n          int64 // inflated bytes given out
	stop       int64 // n may not pass this within the current value
	field      string
	allowance  int64
	err        error // a bound of the whole stream, once broken
}

func (b *boundedReader) allow(field string, bytes int64) {
	b.field, b.allowance, b.stop = field, bytes, b.n+bytes
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	rem := b.stop - b.n
	if rem <= 0 {
		return 0, &BoundError{Field: b.field, Bound: fmt.Sprintf("%d bytes of JSON", b.allowance)}
	}
	if int64(len(p)) > rem {
		p = p[:rem]
	}
	k, err := b.r.Read(p)
	b.n += int64(k)
	// A bound of the whole stream stays broken: json.Decoder drops a read
	// error that came with bytes it could use, and would read on.
	switch {
	case b.n > maxDecompressedBytes:
		b.err = &BoundError{Field: "recording", Bound: fmt.Sprintf("%d bytes inflated", maxDecompressedBytes)}
	case b.n > inflationFloor && b.n > maxInflation*b.compressed.n:
		b.err = &BoundError{Field: "recording", Bound: fmt.Sprintf("%d times its compressed size (%d bytes from %d)",
			maxInflation, b.n, b.compressed.n)}
	}
	if b.err != nil {
		return 0, b.err
	}
	return k, err
}

// decoder reads a recording file's JSON a record at a time.
type decoder struct {
	dec   *json.Decoder
	br    *boundedReader
	bytes int64 // memory charged so far
}

func newDecoder(inflated io.Reader, compressed *countingReader) *decoder {
	br := &boundedReader{r: inflated, compressed: compressed}
	return &decoder{dec: json.NewDecoder(br), br: br}
}

// charge adds n bytes of memory to the recording's budget.
func (d *decoder) charge(field string, n int64) error {
	d.bytes += n
	if d.bytes > MaxRecordingBytes {
		return &BoundError{Field: field, Bound: fmt.Sprintf("%d MiB of memory decoded", MaxRecordingBytes>>20)}
	}
	return nil
}

func (d *decoder) token(field string) (json.Token, error) {
	d.br.allow(field, structureJSON)
	t, err := d.dec.Token()
	var be *BoundError
	if err != nil && !errors.As(err, &be) {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return t, err
}

// open reads the start of an array or object (or null: ok false).
func (d *decoder) open(field string, want json.Delim) (ok bool, err error) {
	t, err := d.token(field)
	if err != nil || t == nil {
		return false, err
	}
	if t != want {
		return false, fmt.Errorf("%s: %v where %v was expected", field, t, want)
	}
	return true, nil
}

// value decodes one JSON value of at most limit bytes into v.
func (d *decoder) value(field string, limit int64, v any) error {
	d.br.allow(field, limit)
	err := d.dec.Decode(v)
	var be *BoundError
	if err != nil && !errors.As(err, &be) {
		return fmt.Errorf("%s: %w", field, err)
	}
	return err
}

// skip passes over a value of a field this build does not know, token by
// token (nothing of it is kept).
func (d *decoder) skip(field string) error {
	depth := 0
	for {
		t, err := d.token(field)
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// records decodes an array one record at a time, charging each record's
// memory (size: its extra beyond the struct, such as strings) and the
// slice's growth.
func records[T any](d *decoder, field string, out *[]T, extra func(*T) int64) error {
	if ok, err := d.open(field, '['); !ok {
		return err
	}
	elem := int64(unsafe.Sizeof(*new(T)))
	for d.dec.More() {
		var v T
		if err := d.value(field, maxRecordJSON, &v); err != nil {
			return fmt.Errorf("record %d of %w", len(*out), err)
		}
		if len(*out) == cap(*out) {
			// Growing copies the records: the old array and the new
			// one are both held until the copy is done.
			c := cap(*out)
			if d.bytes+int64(c+c/4+256)*elem > MaxRecordingBytes { // append's growth, about
				return &BoundError{Field: field, Bound: fmt.Sprintf("%d MiB of memory decoded (at %d records)", MaxRecordingBytes>>20, c)}
			}
			grown := slices.Grow(*out, 1)
			if err := d.charge(field, int64(cap(grown))*elem); err != nil {
				return err
			}
			*out = grown
			d.bytes -= int64(c) * elem
		}
		*out = append(*out, v)
		if err := d.charge(field, extra(&v)); err != nil {
			return err
		}
	}
	_, err := d.token(field)
	return err
}

// column decodes an array of numbers whole into out (reusing its array):
// its JSON may take a twelfth of the budget left (a number takes at least
// two bytes, "0,", and eight in memory, two and a half times that while
// the slice grows, beside the JSON buffered), which bounds what decoding
// it holds; the series it goes into is charged for its buckets.
func column[T int64 | uint64](d *decoder, field string, out *[]T) error {
	left := (MaxRecordingBytes - d.bytes) / 12
	return d.value(field, max(left, structureJSON), out)
}

// decodeSeries reads a series' columns one at a time into its buckets, so
// that what it holds while decoding is the buckets and one column (the
// columns whole would take as much again as the buckets).
func decodeSeries(d *decoder, field string) (Series, error) {
	var s Series
	if ok, err := d.open(field, '{'); !ok {
		if err == nil {
			err = fmt.Errorf("%s: null", field)
		}
		return s, err
	}
	var (
		col    []uint64
		deltas []int64
		n      = -1 // buckets, once a column said
		seen   int
	)
	sized := func(f string, k int) error {
		if n < 0 {
			n = k
			if err := d.charge(f, int64(n)*bucketBytes); err != nil {
				return err
			}
			s.Buckets = make([]Bucket, n)
		}
		if k != n {
			return fmt.Errorf("%s: %d values where the series' other columns have %d", f, k, n)
		}
		seen++
		return nil
	}
	fill := func(f string, set func(b *Bucket, v uint64)) error {
		col = col[:0]
		if err := column(d, f, &col); err != nil {
			return err
		}
		if err := sized(f, len(col)); err != nil {
			return err
		}
		for i, v := range col {
			set(&s.Buckets[i], v)
		}
		return nil
	}
	for d.dec.More() {
		t, err := d.token(field)
		if err != nil {
			return s, err
		}
		key, _ := t.(string)
		f := field + "." + key
		switch strings.ToLower(key) {
		case "interface":
			err = d.value(f, structureJSON, &s.Interface)
		case "direction":
			err = d.value(f, structureJSON, &s.Direction)
		case "width_ns":
			err = d.value(f, structureJSON, &s.WidthNs)
		case "start_delta":
			// The bucket indexes' deltas, as they are: turned into
			// times below, once the width is known.
			if err = column(d, f, &deltas); err == nil {
				if err = sized(f, len(deltas)); err == nil {
					for i, v := range deltas {
						s.Buckets[i].StartNs = v
					}
				}
			}
		case "packets":
			err = fill(f, func(b *Bucket, v uint64) { b.Packets = v })
		case "bytes":
			err = fill(f, func(b *Bucket, v uint64) { b.Bytes = v })
		case "syns":
			err = fill(f, func(b *Bucket, v uint64) { b.SYNs = v })
		case "retrans":
			// Optional (left out when every bucket's is zero), so not
			// one of the columns counted below.
			err = fill(f, func(b *Bucket, v uint64) { b.Retrans = v })
			seen--
		case "link_local":
			var ok bool
			if ok, err = d.open(f, '['); ok {
				for i := 0; d.dec.More() && err == nil; i++ {
					if i == NumServices {
						err = fmt.Errorf("%s: more than %d columns", f, NumServices)
						break
					}
					err = fill(fmt.Sprintf("%s[%d]", f, i), func(b *Bucket, v uint64) { b.LinkLocal[i] = v })
				}
				if err == nil {
					_, err = d.token(f)
				}
			}
		default:
			err = d.skip(f)
		}
		if err != nil {
			return s, err
		}
	}
	if _, err := d.token(field); err != nil {
		return s, err
	}
	if n > 0 && seen != 4+NumServices {
		return s, fmt.Errorf("%s %s %s: %d of its %d columns", field, s.Interface, s.Direction, seen, 4+NumServices)
	}
	return s, bucketTimes(&s)
}

// bucketTimes turns the bucket index deltas decodeSeries left in StartNs
// into start times, refusing a series out of order or out of range.
func bucketTimes(s *Series) error {
	if s.WidthNs <= 0 || s.WidthNs > maxBucketNs {
		return fmt.Errorf("series %s %s: bucket width %d ns, want 1 ns to 1 s", s.Interface, s.Direction, s.WidthNs)
	}
	var idx int64
	limit := math.MaxInt64 / s.WidthNs
	for i := range s.Buckets {
		b := &s.Buckets[i]
		d := b.StartNs
		if d < 0 && i > 0 || d > limit || d < -limit || idx+d > limit || idx+d < -limit {
			return fmt.Errorf("series %s %s: bucket %d out of order or out of range", s.Interface, s.Direction, i)
		}
		idx += d
		b.StartNs = idx * s.WidthNs
	}
	return nil
}

func strlen(s ...string) int64 {
	var n int
	for _, v := range s {
		n += len(v)
	}
	return int64(n)
}

// decoded is a recording file as read: its format, its meta (nil when
// missing or null) and the rest.
type decoded struct {
	Format int
	Meta   *Meta
	Recording
}

// decodeFile reads a recording file's JSON within the bounds.
func (d *decoder) decodeFile() (decoded, error) {
	var f decoded
	if ok, err := d.open("recording", '{'); !ok {
		if err == nil {
			err = errors.New("recording: null")
		}
		return f, err
	}
	for d.dec.More() {
		t, err := d.token("recording")
		if err != nil {
			return f, err
		}
		key, _ := t.(string)
		switch strings.ToLower(key) {
		case "format":
			err = d.value(key, structureJSON, &f.Format)
		case "meta":
			at := d.dec.InputOffset()
			if err = d.value(key, maxMetaBytes, &f.Meta); err == nil {
				err = d.charge(key, 2*(d.dec.InputOffset()-at))
			}
		case "series":
			if ok, e := d.open(key, '['); ok {
				for d.dec.More() && err == nil {
					if len(f.Series) == maxSeries {
						err = &BoundError{Field: key, Bound: fmt.Sprintf("%d series (one per interface and direction)", maxSeries)}
						break
					}
					var s Series
					if s, err = decodeSeries(d, fmt.Sprintf("series[%d]", len(f.Series))); err == nil {
						f.Series = append(f.Series, s)
					}
				}
				if err == nil {
					_, err = d.token(key)
				}
			} else {
				err = e
			}
		case "flows":
			err = records(d, key, &f.Flows, func(v *FlowSnapshot) int64 { return strlen(v.Interface) })
		case "owners":
			err = records(d, key, &f.Owners, func(v *FlowOwner) int64 {
				o := v.Owner
				return strlen(v.Interface, o.Comm, o.Cgroup, o.Unit, o.Container, o.Pod, o.How)
			})
		case "windows":
			err = records(d, key, &f.Windows, func(v *WindowEvent) int64 { return strlen(v.Interface) })
		case "imds":
			err = records(d, key, &f.IMDS, func(v *IMDSEvent) int64 { return strlen(v.Interface) })
		case "link_local_payloads":
			err = records(d, key, &f.LinkLocalPayloads, func(v *LinkLocalPayload) int64 { return strlen(v.Interface) + int64(len(v.Data)) })
		case "sizes":
			err = records(d, key, &f.Sizes, func(v *SizeSlice) int64 { return strlen(v.Interface) })
		case "totals":
			err = records(d, key, &f.Totals, func(v *Totals) int64 { return strlen(v.Interface) })
		case "loss":
			err = records(d, key, &f.Loss, func(v *Loss) int64 { return strlen(v.Interface) })
		case "counters":
			err = records(d, key, &f.Counters, func(v *CounterSample) int64 {
				n := strlen(v.Interface, v.Err) + int64(len(v.Values))*mapEntryBytes
				for name := range v.Values {
					n += int64(len(name))
				}
				return n
			})
		default:
			err = d.skip(key)
		}
		if err != nil {
			return f, err
		}
	}
	_, err := d.token("recording")
	return f, err
}

// mapEntryBytes is a map[string]uint64 entry with its share of the map's
// buckets, about (as serve's flight recorder counts it).
const mapEntryBytes = 48

// bucketBytes is a decoded bucket's memory.
const bucketBytes = int64(unsafe.Sizeof(Bucket{}))
