package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestBoundedDecodeMatchesPlain: the bounded decoder reads every recording
// in testdata to exactly what decoding the file whole gives.
func TestBoundedDecodeMatchesPlain(t *testing.T) {
	paths, err := filepath.Glob("../../testdata/recordings/*.rec.gz")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings in testdata: %v", err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			var want fileRecording
			if err := json.NewDecoder(zr).Decode(&want); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Seek(0, 0); err != nil {
				t.Fatal(err)
			}
			cr := &countingReader{r: f}
			zr, err = gzip.NewReader(cr)
			if err != nil {
				t.Fatal(err)
			}
			d := newDecoder(zr, cr)
			got, err := d.decodeFile()
			if err != nil {
				t.Fatal(err)
			}
			// The plain decode's series, as the format defines them.
			var series []Series
			for _, fs := range want.Series {
				s := Series{Interface: fs.Interface, Direction: fs.Direction, WidthNs: fs.WidthNs, Buckets: make([]Bucket, len(fs.StartDelta))}
				var idx int64
				for i := range s.Buckets {
					idx += fs.StartDelta[i]
					s.Buckets[i] = Bucket{StartNs: idx * fs.WidthNs, Packets: fs.Packets[i], Bytes: fs.Bytes[i], SYNs: fs.SYNs[i]}
					for j := range fs.LinkLocal {
						s.Buckets[i].LinkLocal[j] = fs.LinkLocal[j][i]
					}
				}
				series = append(series, s)
			}
			if got.Format != want.Format || !reflect.DeepEqual(got.Meta, want.Meta.Meta) || !reflect.DeepEqual(got.Series, series) ||
				!reflect.DeepEqual(got.Flows, want.Flows) || !reflect.DeepEqual(got.Owners, want.Owners) ||
				!reflect.DeepEqual(got.Windows, want.Windows) || !reflect.DeepEqual(got.IMDS, want.IMDS) ||
				!reflect.DeepEqual(got.Sizes, want.Sizes) || !reflect.DeepEqual(got.Totals, want.Totals) ||
				!reflect.DeepEqual(got.Loss, want.Loss) || !reflect.DeepEqual(got.Counters, want.Counters) {
				t.Fatal("the bounded decoder read the recording differently")
			}
			t.Logf("%d bytes inflated, %d MiB charged", d.br.n, d.bytes>>20)
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	doc, err := os.ReadFile("../../testdata/recordings/baseline_exhausted.rec.gz")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		for range b.N {
			zr, _ := gzip.NewReader(bytes.NewReader(doc))
			var f fileRecording
			if err := json.NewDecoder(zr).Decode(&f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bounded", func(b *testing.B) {
		for range b.N {
			cr := &countingReader{r: bytes.NewReader(doc)}
			zr, _ := gzip.NewReader(cr)
			if _, err := newDecoder(zr, cr).decodeFile(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
