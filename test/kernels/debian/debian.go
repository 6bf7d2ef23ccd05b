// Package debian fetches Debian packages for the kernel matrix with
// `apt-get download` through a private apt configuration: its own sources
// list, state and cache under a directory of ours, passed as -o options, so
// the machine's /etc/apt is never read for sources nor changed.
package debian

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The archive the machine itself uses, and the key that signs it.
const (
	Mirror         = "http://deb.debian.org/debian"
	SecurityMirror = "http://deb.debian.org/debian-security"
	Keyring        = "/usr/share/keyrings/debian-archive-keyring.gpg"
)

// Apt is one private apt configuration: one suite for one architecture.
type Apt struct {
	Suite string // bullseye, bookworm, trixie
	Arch  string // amd64, arm64
	Dir   string // holds etc/, state/, cache/
}

// NewApt lays out a private configuration for suite and arch under root.
func NewApt(root, suite, arch string) (*Apt, error) {
	a := &Apt{Suite: suite, Arch: arch, Dir: filepath.Join(root, "apt", suite+"-"+arch)}
	for _, d := range []string{"etc/parts", "state/lists/partial", "cache/archives/partial", "download"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("private apt config: %w", err)
		}
	}
	status := filepath.Join(a.Dir, "state/status")
	if _, err := os.Stat(status); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return nil, fmt.Errorf("private apt config: %w", err)
		}
	}
	var sources strings.Builder
	for _, s := range []struct{ uri, suite string }{
		{Mirror, suite}, {Mirror, suite + "-updates"}, {SecurityMirror, suite + "-security"},
	} {
		fmt.Fprintf(&sources, "deb [signed-by=%s] %s %s main\n", Keyring, s.uri, s.suite)
	}
	if err := os.WriteFile(filepath.Join(a.Dir, "etc/sources.list"), []byte(sources.String()), 0o644); err != nil {
		return nil, fmt.Errorf("private apt config: %w", err)
	}
	return a, nil
}

// options points apt at our directories only.
func (a *Apt) options() []string {
	d := a.Dir
	return []string{
		"-o", "Dir::Etc::SourceList=" + d + "/etc/sources.list",
		"-o", "Dir::Etc::SourceParts=" + d + "/etc/parts",
		"-o", "Dir::Etc::Preferences=" + d + "/etc/preferences",
		"-o", "Dir::Etc::PreferencesParts=" + d + "/etc/parts",
		"-o", "Dir::State=" + d + "/state",
		"-o", "Dir::State::status=" + d + "/state/status",
		"-o", "Dir::Cache=" + d + "/cache",
		"-o", "APT::Architecture=" + a.Arch,
		"-o", "APT::Architectures::=" + a.Arch,
		"-o", "Acquire::Languages=none",
		"-o", "Debug::NoLocking=1",
		"-o", "APT::Sandbox::User=root",
	}
}

func (a *Apt) run(dir, tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(tool, append(a.options(), args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s (%s/%s): %w: %s", tool, strings.Join(args, " "), a.Suite, a.Arch, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Update refreshes the package lists when they are older than maxAge.
func (a *Apt) Update(maxAge time.Duration) error {
	stamp := filepath.Join(a.Dir, "state/updated")
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < maxAge {
		return nil
	}
	if _, err := a.run(a.Dir, "apt-get", "update", "-q"); err != nil {
		return err
	}
	return os.WriteFile(stamp, nil, 0o644)
}

// Candidate is the version apt would install of pkg, "" when it has none.
func (a *Apt) Candidate(pkg string) (string, error) {
	out, err := a.run(a.Dir, "apt-cache", "policy", pkg)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s+Candidate:\s+(\S+)`).FindSubmatch(out)
	if m == nil || string(m[1]) == "(none)" {
		return "", nil
	}
	return string(m[1]), nil
}

// Depends lists the direct Depends of pkg (first alternative of each).
func (a *Apt) Depends(pkg string) ([]string, error) {
	out, err := a.run(a.Dir, "apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances", pkg)
	if err != nil {
		return nil, err
	}
	var deps []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "Depends: "); ok && !strings.HasPrefix(name, "<") {
			deps = append(deps, strings.TrimSuffix(name, ":"+a.Arch))
		}
	}
	return deps, nil
}

// Closure is pkgs and the packages of their recursive Depends and
// Pre-Depends (coreutils pre-depends on its libraries) for which keep says
// yes, in one apt-cache call.
func (a *Apt) Closure(pkgs []string, keep func(string) bool) ([]string, error) {
	args := append([]string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}, pkgs...)
	out, err := a.run(a.Dir, "apt-cache", args...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p] = true
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		_, name, ok := strings.Cut(line, "Depends: ") // Depends and PreDepends
		if ok && !strings.HasPrefix(name, "<") {
			name = strings.TrimSuffix(name, ":"+a.Arch)
			if keep(name) {
				seen[name] = true
			}
		}
	}
	all := make([]string, 0, len(seen))
	for p := range seen {
		all = append(all, p)
	}
	sort.Strings(all)
	return all, nil
}

// Candidates is Candidate for many packages in one apt-cache call.
func (a *Apt) Candidates(pkgs []string) (map[string]string, error) {
	out, err := a.run(a.Dir, "apt-cache", append([]string{"policy"}, pkgs...)...)
	if err != nil {
		return nil, err
	}
	return parsePolicy(string(out), a.Arch), nil
}

// parsePolicy reads apt-cache policy's output: each package's name line,
// then its Candidate line ("(none)" when the archive has no version).
func parsePolicy(out, arch string) map[string]string {
	got := map[string]string{}
	current := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			current = strings.TrimSuffix(strings.TrimSuffix(line, ":"), ":"+arch)
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate: "); ok && current != "" && v != "(none)" {
			got[current] = v
		}
	}
	return got
}

// Download fetches pkg at version into the private download directory
// (once) and returns the .deb's path.
func (a *Apt) Download(pkg, version string) (string, error) {
	dir := filepath.Join(a.Dir, "download")
	glob := filepath.Join(dir, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb")
	if m, _ := filepath.Glob(glob); len(m) == 1 {
		return m[0], nil
	}
	if _, err := a.run(dir, "apt-get", "download", "-q", pkg+"="+version); err != nil {
		return "", err
	}
	m, _ := filepath.Glob(glob)
	if len(m) != 1 {
		return "", fmt.Errorf("apt-get download %s=%s left no %s", pkg, version, glob)
	}
	return m[0], nil
}

// Extract unpacks a .deb's files into dir.
func Extract(deb, dir string) error {
	if out, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", filepath.Base(deb), err, out)
	}
	return nil
}
