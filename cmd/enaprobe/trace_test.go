package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/loader"
)

// TestVerifierLog: a rejection's log goes whole to stderr with --debug and
// to the file of --verifier-log; the error stays one line and says where
// the log is or how to get it.
func TestVerifierLog(t *testing.T) {
	log := make([]string, 6666)
	for i := range log {
		log[i] = fmt.Sprintf("%d: (bf) r0 = r%d", i, i%10)
	}
	vr := &loader.VerifierRejection{Program: "enaprobe_egress", Log: log}
	err := fmt.Errorf("interface lo: %w", vr)
	file := filepath.Join(t.TempDir(), "verifier.log")
	for _, c := range []struct {
		name        string
		flags       traceFlags
		wantStderr  bool
		wantFile    bool
		wantInError string
	}{
		{"plain", traceFlags{}, false, false, "--verifier-log FILE saves the log"},
		{"debug", traceFlags{debug: true}, true, false, "the log is above"},
		{"file", traceFlags{verifierLog: file}, false, true, "the log is in " + file},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(file)
			var stderr bytes.Buffer
			got := verifierLog(&stderr, err, vr, &c.flags).Error()
			if strings.Contains(got, "\n") || !strings.Contains(got, c.wantInError) || !strings.Contains(got, "enaprobe_egress") {
				t.Errorf("error %q: want one line naming the program and %q", got, c.wantInError)
			}
			whole := strings.Join(log, "\n") + "\n"
			if has := strings.Contains(stderr.String(), whole); has != c.wantStderr {
				t.Errorf("whole log on stderr: %v, want %v", has, c.wantStderr)
			}
			b, rerr := os.ReadFile(file)
			if c.wantFile && string(b) != whole || !c.wantFile && rerr == nil {
				t.Errorf("log file of %d bytes (%v), want it %v", len(b), rerr, c.wantFile)
			}
		})
	}
}
