// Package initramfs writes the cpio archive ("newc" format, uncompressed)
// that a kernel-matrix guest boots from. The format is a 110-byte ASCII
// header per entry and 4-byte padding, so a writer of our own is shorter
// than wiring in a general cpio library; the archive is left uncompressed
// because decompressing under TCG costs the guest more than the bytes do.
package initramfs

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Writer adds entries to a newc archive, creating parent directories as
// needed, each once.
type Writer struct {
	w    *bufio.Writer
	ino  uint32
	dirs map[string]bool
	err  error
}

// NewWriter starts an archive on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 1<<20), ino: 1, dirs: map[string]bool{"": true, ".": true, "/": true}}
}

func (w *Writer) header(name string, mode uint32, size int, rdevMajor, rdevMinor uint32) {
	if w.err != nil {
		return
	}
	w.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	_, w.err = fmt.Fprintf(w.w, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		w.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	if w.err == nil {
		_, w.err = w.w.WriteString(name + "\x00")
	}
	w.pad(110 + len(name) + 1)
}

func (w *Writer) pad(n int) {
	if w.err == nil && n%4 != 0 {
		_, w.err = w.w.Write(make([]byte, 4-n%4))
	}
}

func (w *Writer) body(data []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(data)
	}
	w.pad(len(data))
}

func clean(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

// Dir adds a directory and its parents.
func (w *Writer) Dir(name string) {
	name = clean(name)
	if w.dirs[name] {
		return
	}
	w.Dir(path.Dir(name))
	w.dirs[name] = true
	w.header(name, 0o040755, 0, 0, 0)
}

// File adds a regular file with permission bits perm.
func (w *Writer) File(name string, perm fs.FileMode, data []byte) {
	name = clean(name)
	w.Dir(path.Dir(name))
	w.header(name, 0o100000|uint32(perm.Perm()), len(data), 0, 0)
	w.body(data)
}

// Symlink adds name pointing at target.
func (w *Writer) Symlink(name, target string) {
	name = clean(name)
	w.Dir(path.Dir(name))
	w.header(name, 0o120777, len(target), 0, 0)
	w.body([]byte(target))
}

// CharDev adds a character device node.
func (w *Writer) CharDev(name string, major, minor uint32) {
	name = clean(name)
	w.Dir(path.Dir(name))
	w.header(name, 0o020600, 0, major, minor)
}

// CopyFile adds the file at src as name, keeping its permission bits.
func (w *Writer) CopyFile(name, src string) {
	if w.err != nil {
		return
	}
	st, err := os.Stat(src)
	if err != nil {
		w.err = err
		return
	}
	data, err := os.ReadFile(src)
	if err != nil {
		w.err = err
		return
	}
	w.File(name, st.Mode(), data)
}

// Tree adds everything under src at the archive's directory at ("" for
// the root), symlinks as symlinks.
func (w *Writer) Tree(src, at string) {
	if w.err != nil {
		return
	}
	w.err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || w.err != nil {
			return errorsJoin(err, w.err)
		}
		rel, _ := filepath.Rel(src, p)
		rel = path.Join(at, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			w.Dir(rel)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			w.Symlink(rel, target)
		case d.Type().IsRegular():
			w.CopyFile(rel, p)
		}
		return w.err
	})
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Close writes the trailer and flushes.
func (w *Writer) Close() error {
	w.header("TRAILER!!!", 0, 0, 0, 0)
	if w.err != nil {
		return fmt.Errorf("write initramfs: %w", w.err)
	}
	return w.w.Flush()
}
