package report

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// bundleContents returns the files of a bundle by base name.
func bundleContents(t *testing.T, p string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if !record.IsArchive(p) {
		entries, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(p, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
		return out
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if dir := path.Dir(h.Name); dir != strings.TrimSuffix(filepath.Base(p), ".tar.gz") {
			t.Errorf("%s: in %q, want the directory named after the archive", h.Name, dir)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Base(h.Name)] = b
	}
	return out
}

var bundleNames = []string{record.BundleEnvironment, record.BundleRecording, BundleReportHTML, BundleReportJSON, BundleReportText}

// TestBundleRoundTrip writes a bundle as a directory and as a .tar.gz,
// reads it back, and analyzes the recording again: the report is the same
// as the one in the bundle, as `enaprobe analyze BUNDLE` would print it.
func TestBundleRoundTrip(t *testing.T) {
	in := loadInput(t, "microburst_out")
	var want bytes.Buffer
	if err := record.Write(&want, in.Recording); err != nil {
		t.Fatal(err)
	}
	original, err := record.Read(&want)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "bundle"), filepath.Join(dir, "trace-1.tar.gz")} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			if err := WriteBundle(p, in); err != nil {
				t.Fatal(err)
			}
			files := bundleContents(t, p)
			var names []string
			for n := range files {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, bundleNames) {
				t.Fatalf("bundle holds %v, want %v", names, bundleNames)
			}
			if got := string(files[BundleReportText]); got != renderText(t, in) {
				t.Error("report.txt differs from Text")
			}
			rec, env, err := record.ReadBundle(p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rec, original) {
				t.Error("recording read back differs from the one written")
			}
			if !reflect.DeepEqual(env, in.Env) {
				t.Errorf("environment read back %+v, want %+v", env, in.Env)
			}
			var again bytes.Buffer
			if err := JSON(&again, analyzer.Analyze(rec, analyzer.DefaultOptions())); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), files[BundleReportJSON]) {
				t.Error("analyzing the bundle's recording again gives another report.json")
			}
		})
	}
}

// TestReadBundleBareRecording: a bare recording file is read by the same
// entry point, its environment taken from the recording's metadata.
func TestReadBundleBareRecording(t *testing.T) {
	in := loadInput(t, "steady")
	rec, env, err := record.ReadBundle(filepath.Join(recordingsDir, "steady.rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec, in.Recording) {
		t.Error("recording read back differs from the one written")
	}
	if want := record.EnvironmentOf(in.Recording); !reflect.DeepEqual(env, want) {
		t.Errorf("environment %+v, want %+v", env, want)
	}
}

func TestBundleErrors(t *testing.T) {
	in := loadInput(t, "steady")
	dir := t.TempDir()
	if err := WriteBundle(filepath.Join(dir, "x"), Input{Result: in.Result}); err == nil {
		t.Error("bundle written without a recording")
	}
	if _, _, err := record.ReadBundle(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing bundle read")
	}
	plain := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := record.ReadBundle(plain); err == nil {
		t.Error("plain file read as a bundle")
	} else if !strings.Contains(err.Error(), "neither a bundle") {
		t.Errorf("plain file: %v, want it to say what is read", err)
	}
	// A directory bundle without environment.json, and an archive of one.
	partial := filepath.Join(dir, "partial")
	if err := WriteBundle(partial, in); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(partial, record.BundleEnvironment)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := record.ReadBundle(partial); err == nil {
		t.Error("bundle without environment.json read")
	}
	archive := filepath.Join(dir, "partial.tar.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	rec, err := os.ReadFile(filepath.Join(partial, record.BundleRecording))
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "partial/" + record.BundleRecording, Mode: 0o644, Size: int64(len(rec))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(rec)
	tw.Close()
	zw.Close()
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := record.ReadBundle(archive); err == nil {
		t.Error("archive without environment.json read")
	}
}
