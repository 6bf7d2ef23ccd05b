package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/report"
)

// environment describes the trace for the bundle.
func environment(rec *record.Recording, commandLine string) record.Environment {
	env := record.EnvironmentOf(rec)
	env.CommandLine = commandLine
	return env
}

// fileExtensions are endings that name a file of another kind: a bundle is
// a directory or a .tar.gz, and "-o x.zip" would otherwise be a directory
// named x.zip.
var fileExtensions = []string{".zip", ".tar", ".gz", ".bz2", ".xz", ".zst", ".7z", ".json", ".txt", ".html", ".htm"}

// checkBundlePath refuses an -o that cannot be written, before anything is
// traced: its parents are created and a file is made and removed in the
// directory the bundle goes to, so a trace never ends on a path it cannot
// use.
func checkBundlePath(p string) error {
	if isUpload(p) {
		return nil // written to the temporary directory, then uploaded
	}
	if err := checkBundleName(p); err != nil || p == "" {
		return err
	}
	dir := p
	if record.IsArchive(p) {
		dir = filepath.Dir(p)
	}
	created, err := mkdirAll(dir)
	if err != nil {
		return usagef("-o %s: %v", p, err)
	}
	if err := chownToInvoker(created...); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".enaprobe-check-*")
	if err != nil {
		// The probe file's name means nothing to the user: say which
		// directory and why (read-only file system, permission denied).
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usagef("-o %s: cannot write in %s: %v", p, dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkBundleName refuses an -o that names something other than a bundle,
// touching nothing.
func checkBundleName(p string) error {
	if p == "" {
		return nil
	}
	st, statErr := os.Stat(p)
	if record.IsArchive(p) {
		if statErr == nil && st.IsDir() {
			return usagef("-o %s: is a directory; name a .tar.gz file, or the directory without .tar.gz", p)
		}
		return nil
	}
	if ext := strings.ToLower(filepath.Ext(p)); statErr != nil {
		for _, e := range fileExtensions {
			if ext == e {
				return usagef("-o %s: a bundle is a directory or a file ending in .tar.gz (e.g. -o /tmp/ena.tar.gz)", p)
			}
		}
	}
	if statErr == nil && !st.IsDir() {
		return usagef("-o %s: exists and is not a directory; name a new directory or a .tar.gz file", p)
	}
	return nil
}

// mkdirAll is os.MkdirAll returning the directories it made, outermost
// first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
		if filepath.Dir(d) == d {
			break
		}
	}
	return missing, os.MkdirAll(dir, 0o755)
}

// invoker is the user who ran enaprobe through sudo (SUDO_UID, SUDO_GID),
// so that the bundle belongs to them and "analyze it again, no root" works.
func invoker() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, errU := strconv.Atoi(os.Getenv("SUDO_UID"))
	g, errG := strconv.Atoi(os.Getenv("SUDO_GID"))
	if errU != nil || errG != nil || u <= 0 {
		return 0, 0, false
	}
	return u, g, true
}

// chownToInvoker gives paths to the sudo user, when there is one.
func chownToInvoker(paths ...string) error {
	uid, gid, ok := invoker()
	if !ok {
		return nil
	}
	for _, p := range paths {
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("give %s to the user who ran sudo (uid %d): %w", p, uid, err)
		}
	}
	return nil
}

// writeBundle writes the bundle and hands it to the sudo user.
func writeBundle(p string, in report.Input) error {
	if err := report.WriteBundle(p, in); err != nil {
		return err
	}
	paths := []string{p}
	if !record.IsArchive(p) {
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			paths = append(paths, filepath.Join(p, e.Name()))
		}
	}
	return chownToInvoker(paths...)
}

// writeReports analyzes rec, writes the report to w in the chosen format,
// and writes the bundle when asked. The report is written whatever happens
// to the bundle, and a bundle that cannot be written where asked goes to
// the temporary directory instead: a trace that ran is never lost.
func writeReports(w io.Writer, rec *record.Recording, opts analyzer.Options, out outputFlags, env record.Environment, log zerolog.Logger) error {
	res := analyzer.Analyze(rec, opts)
	rec.Meta.Analysis = analyzer.Inputs(res, opts)
	in := report.Input{Result: res, Recording: rec, Env: env}
	if out.redact {
		in = report.Redact(in)
	}
	var reportErr error
	if out.format == "json" {
		reportErr = report.JSON(w, in.Result)
	} else {
		reportErr = report.Text(w, in)
	}
	if reportErr != nil {
		reportErr = fmt.Errorf("write the report: %w", reportErr)
	}
	if out.output == "" {
		return reportErr
	}
	if isUpload(out.output) {
		err := uploadBundle(context.Background(), out.output, out.upload, func(p string) error { return writeBundle(p, in) }, in.Recording, log)
		return errors.Join(reportErr, err)
	}
	err := writeBundle(out.output, in)
	if err == nil {
		log.Info().Str("bundle", out.output).Msg("bundle written")
		return reportErr
	}
	fallback := filepath.Join(os.TempDir(), "enaprobe-"+time.Now().UTC().Format("20060102T150405Z")+".tar.gz")
	if ferr := writeBundle(fallback, in); ferr != nil {
		return errors.Join(reportErr, err, fmt.Errorf("and the fallback: %w", ferr))
	}
	log.Error().Err(err).Str("bundle", fallback).Msg("bundle written to the temporary directory instead")
	return errors.Join(reportErr, fmt.Errorf("%w (the bundle is in %s)", err, fallback))
}
