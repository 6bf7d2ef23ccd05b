package debian

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GuestTools are the Debian packages whose commands the tests run inside a
// guest: ip and tc (iproute2), bpftool, sysctl (procps), true and the like
// (coreutils).
var GuestTools = []string{"iproute2", "bpftool", "procps", "coreutils"}

// Userland downloads tools and the libraries they link (the lib* packages of
// their dependency closure) for the Apt's architecture and unpacks them into
// one tree, cached under root by the packages' versions. Documentation is
// left out.
func Userland(root string, a *Apt, tools []string) (string, error) {
	pkgs, err := a.Closure(tools, isLibrary)
	if err != nil {
		return "", err
	}
	candidates, err := a.Candidates(pkgs)
	if err != nil {
		return "", err
	}
	versions := make([]string, len(pkgs))
	h := sha256.New()
	for i, p := range pkgs {
		if versions[i] = candidates[p]; versions[i] == "" {
			return "", fmt.Errorf("no candidate version of %s in %s/%s", p, a.Suite, a.Arch)
		}
		fmt.Fprintf(h, "%s=%s\n", p, versions[i])
	}
	dir := filepath.Join(root, "userland", a.Suite+"-"+a.Arch+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	tree := filepath.Join(dir, "root")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return tree, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return "", err
	}
	for i, p := range pkgs {
		deb, err := a.Download(p, versions[i])
		if err != nil {
			return "", err
		}
		if err := Extract(deb, tree); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian", "usr/share/bash-completion"} {
		if err := os.RemoveAll(filepath.Join(tree, d)); err != nil {
			return "", err
		}
	}
	if err := checkLinked(tree); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), []byte(strings.Join(pkgs, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	return tree, nil
}

// isLibrary says which dependencies to follow: shared libraries (Debian
// names them lib*, and zlib's package zlib1g), not the maintainer scripts'
// debconf and perl, which the tools never run.
func isLibrary(pkg string) bool {
	return strings.HasPrefix(pkg, "lib") || pkg == "zlib1g"
}

// checkLinked makes sure every shared library the tree's executables need
// is in the tree, so a missing one fails here by name instead of in a test.
func checkLinked(tree string) error {
	have := map[string]bool{}
	var bins []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".so") {
			have[d.Name()] = true
		}
		if d.Type().IsRegular() && (strings.Contains(p, "/bin/") || strings.Contains(p, "/sbin/")) {
			bins = append(bins, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, b := range bins {
		f, err := elf.Open(b)
		if err != nil {
			continue // a script
		}
		libs, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		for _, l := range libs {
			if !have[l] {
				return fmt.Errorf("%s needs %s, which no package of the closure holds", filepath.Base(b), l)
			}
		}
	}
	return nil
}
