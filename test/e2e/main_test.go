//go:build linux

// Package e2e runs the real enaprobe binary against real traffic: in veth
// pairs and in the lab, all inside network namespaces the tests create.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the enaprobe built once for all tests.
var binary string

// atExit runs after every test: the removal of what tests share (the
// container image).
var atExit []func()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "enaprobe-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "enaprobe")
	out, err := exec.Command("go", "build", "-o", binary, "../../cmd/enaprobe").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build enaprobe: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
