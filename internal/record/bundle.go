package record

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// A bundle is everything about one trace: the recording, the environment it
// was taken in, and the reports rendered from them (report.WriteBundle). This
// file owns its layout; the reports are opaque files to it.
const (
	BundleRecording   = "recording.json.gz"
	BundleEnvironment = "environment.json"
)

// maxEnvironmentSize bounds environment.json when reading a bundle.
const maxEnvironmentSize = 1 << 20

// Environment is where and how the trace was taken, beyond what the
// recording's metadata holds. It is written to environment.json in a bundle.
type Environment struct {
	EnaprobeVersion string             `json:"enaprobe_version"`
	Kernel          string             `json:"kernel"`
	Hostname        string             `json:"hostname"`
	InstanceType    string             `json:"instance_type"`
	AttachMode      string             `json:"attach_mode"`
	BucketMode      string             `json:"bucket_mode"` // per-cpu or shared
	CommandLine     string             `json:"command_line"`
	Interfaces      []InterfaceEnviron `json:"interfaces"`
}

// InterfaceEnviron is one traced interface and its driver.
type InterfaceEnviron struct {
	Name          string `json:"name"`
	Driver        string `json:"driver"`
	DriverVersion string `json:"driver_version"`
	ENA           bool   `json:"ena"` // allowance counters available
	MTU           int    `json:"mtu"`
}

// EnvironmentOf fills an Environment from a recording's metadata, for a
// caller that has nothing more (CommandLine stays empty).
func EnvironmentOf(rec *Recording) Environment {
	m := rec.Meta
	env := Environment{EnaprobeVersion: m.Version, Kernel: m.Kernel, Hostname: m.Hostname,
		InstanceType: m.InstanceType, AttachMode: m.AttachMode, BucketMode: m.BucketMode, Interfaces: []InterfaceEnviron{}}
	for _, i := range m.Interfaces {
		env.Interfaces = append(env.Interfaces, InterfaceEnviron{Name: i.Name, Driver: i.Driver,
			DriverVersion: i.DriverVersion, ENA: i.ENA, MTU: i.MTU})
	}
	return env
}

// IsArchive tells whether a bundle path names a .tar.gz file rather than a
// directory.
func IsArchive(p string) bool {
	return strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz")
}

// BundleFile is one file of a bundle besides the recording and the
// environment: a rendered report.
type BundleFile struct {
	Name string
	Data []byte
}

// WriteBundle writes a bundle to p: the given files (the reports), the
// recording (Write) and the environment. p is a directory (created if
// needed) or a file ending in .tar.gz, whose files sit in a directory named
// after it.
func WriteBundle(p string, rec *Recording, env Environment, files ...BundleFile) error {
	if rec == nil {
		return fmt.Errorf("write bundle %s: a bundle needs the recording", p)
	}
	var buf bytes.Buffer
	if err := Write(&buf, rec); err != nil {
		return fmt.Errorf("write bundle %s: %w", p, err)
	}
	envJSON, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return fmt.Errorf("write bundle %s: encode environment: %w", p, err)
	}
	files = append(files[:len(files):len(files)],
		BundleFile{BundleRecording, buf.Bytes()}, BundleFile{BundleEnvironment, append(envJSON, '\n')})
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

func writeDir(dir string, files []BundleFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
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

// archiveClock is the time an archive's entries get; tests set it.
var archiveClock = time.Now

// writeArchive writes the archive to a temporary file beside p and renames
// it, so that p is never a truncated archive.
func writeArchive(p string, files []BundleFile) (err error) {
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
	// Whole seconds: tar headers hold seconds, and archive/tar rounds to
	// the nearest one, so an mtime up to half a second ahead made GNU tar
	// warn "time stamp ... in the future" on a bundle extracted at once.
	root, now := archiveRoot(p), archiveClock().Truncate(time.Second)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: root + "/", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(root, f.Name), Mode: 0o644, Size: int64(len(f.Data)), ModTime: now}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
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
// Write makes). A bare recording has no environment file; its
// environment is what the recording's metadata holds (EnvironmentOf).
func ReadBundle(p string) (*Recording, Environment, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, Environment{}, fmt.Errorf("read bundle: %w", err)
	}
	var rec *Recording
	var env Environment
	switch {
	case st.IsDir():
		rec, env, err = readDir(p)
	case IsArchive(p):
		rec, env, err = readArchive(p)
	default:
		if rec, err = ReadFile(p); err == nil {
			env = EnvironmentOf(rec)
		} else {
			err = fmt.Errorf("neither a bundle (a directory or a .tar.gz) nor a recording: %w", err)
		}
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) {
			return nil, Environment{}, fmt.Errorf("read bundle %s: %w", p, err)
		}
		return nil, Environment{}, &NotBundleError{Path: p, Err: err}
	}
	return rec, env, nil
}

// NotBundleError is a file or directory that was read but is not a bundle
// enaprobe wrote: another file, a report alone, a truncated archive. It is
// the caller's input that is wrong, not the reading.
type NotBundleError struct {
	Path string
	Err  error
}

func (e *NotBundleError) Error() string {
	return fmt.Sprintf("%s is not a bundle: want the .tar.gz or directory that trace -o or serve wrote, whole, or its %s (%v)",
		e.Path, BundleRecording, e.Err)
}

func (e *NotBundleError) Unwrap() error { return e.Err }

func readDir(dir string) (*Recording, Environment, error) {
	rec, err := ReadFile(filepath.Join(dir, BundleRecording))
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
func readArchive(p string) (*Recording, Environment, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, Environment{}, err
	}
	defer f.Close()
	cr := &countingReader{r: f}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		return nil, Environment{}, fmt.Errorf("open archive: %w", err)
	}
	defer zr.Close()
	// The archive is bounded as a recording is: whatever entries come
	// before the two files are read through, and may not inflate without
	// end. The recording inside is gzip of its own, bounded by Read.
	br := &boundedReader{r: zr, compressed: cr}
	br.allow("archive", maxDecompressedBytes+1)
	tr := tar.NewReader(br)
	var rec *Recording
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
			if rec, err = Read(tr); err != nil {
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
