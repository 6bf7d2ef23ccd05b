package report

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

// The files of a bundle.
const (
	BundleReportJSON  = "report.json"
	BundleReportText  = "report.txt"
	BundleReportHTML  = "report.html"
	BundleRecording   = "recording.json.gz"
	BundleEnvironment = "environment.json"
)

// maxEnvironmentSize bounds environment.json when reading a bundle.
const maxEnvironmentSize = 1 << 20

// IsArchive tells whether a bundle path names a .tar.gz file rather than a
// directory.
func IsArchive(p string) bool {
	return strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz")
}

type bundleFile struct {
	name string
	data []byte
}

// WriteBundle writes everything about one trace to path: the JSON, text
// and HTML reports, the recording (record.Write) and the environment. path
// is a directory (created if needed) or a file ending in .tar.gz, whose
// files sit in a directory named after it. Both Result and Recording are
// required: a bundle is meant to be analyzed again (ReadBundle).
func WriteBundle(p string, in Input) error {
	if in.Result == nil || in.Recording == nil {
		return errors.New("write bundle: a bundle needs both the result and the recording")
	}
	files, err := bundleFiles(in)
	if err != nil {
		return fmt.Errorf("write bundle %s: %w", p, err)
	}
	if IsArchive(p) {
		err = writeArchive(p, files)
	} else {
		err = writeDir(p, files)
	}
	if err != nil {
		return fmt.Errorf("write bundle %s: %w", p, err)
	}
	return nil
}

func bundleFiles(in Input) ([]bundleFile, error) {
	var files []bundleFile
	render := func(name string, f func(io.Writer) error) error {
		var buf bytes.Buffer
		if err := f(&buf); err != nil {
			return err
		}
		files = append(files, bundleFile{name, buf.Bytes()})
		return nil
	}
	env := func(w io.Writer) error {
		b, err := json.MarshalIndent(in.Env, "", "  ")
		if err != nil {
			return fmt.Errorf("encode environment: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	steps := []struct {
		name string
		f    func(io.Writer) error
	}{
		{BundleReportJSON, func(w io.Writer) error { return JSON(w, in.Result) }},
		{BundleReportText, func(w io.Writer) error { return Text(w, in) }},
		{BundleReportHTML, func(w io.Writer) error { return HTML(w, in) }},
		{BundleRecording, func(w io.Writer) error { return record.Write(w, in.Recording) }},
		{BundleEnvironment, env},
	}
	for _, s := range steps {
		if err := render(s.name, s.f); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func writeDir(dir string, files []bundleFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// archiveRoot is the directory the files of an archive sit in: the
// archive's name without .tar.gz, so that unpacking it does not scatter
// report.txt into the current directory.
func archiveRoot(p string) string {
	base := filepath.Base(p)
	return strings.TrimSuffix(strings.TrimSuffix(base, ".tar.gz"), ".tgz")
}

// writeArchive writes the archive to a temporary file beside p and renames
// it, so that p is never a truncated archive.
func writeArchive(p string, files []bundleFile) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	// CreateTemp makes it 0600; a bundle is meant to be shared, as the
	// directory form's files are.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw := gzip.NewWriter(tmp)
	tw := tar.NewWriter(zw)
	root, now := archiveRoot(p), time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: root + "/", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(root, f.name), Mode: 0o644, Size: int64(len(f.data)), ModTime: now}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// ReadBundle is the one reader of saved traces: a bundle written by
// WriteBundle (a directory or a .tar.gz) or a bare recording file (what
// record.Write makes). A bare recording has no environment file; its
// environment is what the recording's metadata holds (EnvironmentOf).
func ReadBundle(p string) (*record.Recording, Environment, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, Environment{}, fmt.Errorf("read bundle: %w", err)
	}
	var rec *record.Recording
	var env Environment
	switch {
	case st.IsDir():
		rec, env, err = readDir(p)
	case IsArchive(p):
		rec, env, err = readArchive(p)
	default:
		if rec, err = record.ReadFile(p); err == nil {
			env = EnvironmentOf(rec)
		} else {
			err = fmt.Errorf("neither a bundle (a directory or a .tar.gz) nor a recording: %w", err)
		}
	}
	if err != nil {
		return nil, Environment{}, fmt.Errorf("read bundle %s: %w", p, err)
	}
	return rec, env, nil
}

func readDir(dir string) (*record.Recording, Environment, error) {
	rec, err := record.ReadFile(filepath.Join(dir, BundleRecording))
	if err != nil {
		return nil, Environment{}, err
	}
	f, err := os.Open(filepath.Join(dir, BundleEnvironment))
	if err != nil {
		return nil, Environment{}, err
	}
	defer f.Close()
	env, err := decodeEnvironment(f)
	return rec, env, err
}

func decodeEnvironment(r io.Reader) (Environment, error) {
	var env Environment
	dec := json.NewDecoder(io.LimitReader(r, maxEnvironmentSize))
	if err := dec.Decode(&env); err != nil {
		return Environment{}, fmt.Errorf("decode %s: %w", BundleEnvironment, err)
	}
	return env, nil
}

// readArchive finds the two files by their base names, in whatever
// directory the archive holds them (a bundle repacked by hand still reads).
func readArchive(p string) (*record.Recording, Environment, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, Environment{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, Environment{}, fmt.Errorf("open archive: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var rec *record.Recording
	var env *Environment
	for rec == nil || env == nil {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, Environment{}, fmt.Errorf("read archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		switch path.Base(h.Name) {
		case BundleRecording:
			if rec, err = record.Read(tr); err != nil {
				return nil, Environment{}, fmt.Errorf("%s: %w", h.Name, err)
			}
		case BundleEnvironment:
			e, err := decodeEnvironment(tr)
			if err != nil {
				return nil, Environment{}, err
			}
			env = &e
		}
	}
	switch {
	case rec == nil:
		return nil, Environment{}, fmt.Errorf("no %s in the archive", BundleRecording)
	case env == nil:
		return nil, Environment{}, fmt.Errorf("no %s in the archive", BundleEnvironment)
	}
	return rec, *env, nil
}
