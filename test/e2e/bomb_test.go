//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// gzipBomb is the file of issue 23: {"format":1,"flows":[{},{},...]} with
// 25 million empty flows, about 71 kB of gzip inflating to 75 MB, 3.8 GB
// once decoded whole.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("{},", 1<<16))
	zw.Write([]byte(`{"format":1,"flows":[`))
	for range 25_000_000 / (1 << 16) {
		zw.Write(chunk)
	}
	zw.Write([]byte(`{}]}`))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombBundle is a .tar.gz bundle holding the bomb as its recording.
func bombBundle(t *testing.T, recording []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		data []byte
	}{{"enaprobe-bomb/environment.json", []byte(`{"enaprobe_version":"test"}`)}, {"enaprobe-bomb/recording.json.gz", recording}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAnalyzeDecompressionBomb: `enaprobe analyze` refuses the bomb, bare
// and inside a bundle, with a usage error naming the field and its bound,
// and its peak RSS stays within a few hundred MiB (it passed 1 GiB before
// the reader was bounded).
func TestAnalyzeDecompressionBomb(t *testing.T) {
	const maxRSS = 300 << 20
	dir := t.TempDir()
	rec := gzipBomb(t)
	bare := filepath.Join(dir, "recording.json.gz")
	bundle := filepath.Join(dir, "bomb.tar.gz")
	if err := os.WriteFile(bare, rec, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, bombBundle(t, rec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("bomb: %d bytes of gzip", len(rec))
	for _, p := range []string{bare, bundle} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			cmd := exec.Command(binary, "analyze", p)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("analyze: %v, want exit 2\n%s", err, stderr.String())
			}
			msg := stderr.String()
			if !strings.Contains(msg, "flows") || !strings.Contains(msg, "MiB") {
				t.Errorf("the error does not name the field and its bound:\n%s", msg)
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
			t.Logf("peak RSS %.1f MiB: %s", float64(rss)/(1<<20), strings.TrimSpace(msg))
			if rss > maxRSS {
				t.Errorf("peak RSS %d bytes, want at most %d", rss, maxRSS)
			}
		})
	}
}
