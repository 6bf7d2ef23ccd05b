package deploy

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelease runs `make release` into a temporary directory and checks
// what it promises: a static binary per architecture (no interpreter, no
// shared library), each stamped with `git describe` as `version` and
// `--version` print it, and checksums that match.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is missing: install it (Debian: make)")
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "release", "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	desc, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	want := "enaprobe " + strings.TrimSpace(string(desc))

	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		name := "enaprobe-linux-" + arch
		path := filepath.Join(dist, name)
		checkStatic(t, path, machine)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := sums[name]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS has %q for %s, the file hashes to %x", got, name, sum)
		}
		delete(sums, name)
	}
	if len(sums) > 0 {
		t.Errorf("SHA256SUMS lists files that are not released: %v", sums)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(filepath.Join(dist, "enaprobe-linux-amd64"), args...).Output()
		if err != nil {
			t.Fatalf("enaprobe %s: %v", args[0], err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("enaprobe %s printed %q, want %q", args[0], got, want)
		}
	}
}

// checkStatic fails unless path is an ELF executable for machine that the
// kernel runs without a dynamic loader.
func checkStatic(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %v %v, want %v ET_EXEC", path, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not static", path, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", path, libs)
	}
}

// readSums parses sha256sum's output: "HEX  NAME" a line.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hash, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q is not sha256sum output", path, sc.Text())
		}
		sums[name] = hash
	}
	return sums
}
