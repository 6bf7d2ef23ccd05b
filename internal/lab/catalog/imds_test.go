//go:build linux

package catalog_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/lab/catalog"
	"github.com/enaprobe/enaprobe/internal/owner"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/ownertest"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// The test binary is also the IMDS client: run with imdsClientEnv set, it
// reads instance metadata with the AWS SDK for Go v2 IMDS client and exits.
const imdsClientEnv = "ENAPROBE_LAB_IMDS_CLIENT"

// imdsReads is how many metadata reads the client makes, each bounded by
// the SDK's 5 s operation timeout and imdsClientTimeout.
const (
	imdsReads         = 3
	imdsClientTimeout = 20 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv(imdsClientEnv) != "" {
		if err := imdsClient(); err != nil {
			fmt.Fprintf(os.Stderr, "imds client: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// imdsClient is a workload as a container runs it: the SDK's IMDS client,
// IMDSv2 first, falling back to IMDSv1 as it does by default. It prints
// its pid, then one line per read.
func imdsClient() error {
	fmt.Println(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), imdsClientTimeout)
	defer cancel()
	c := imds.New(imds.Options{
		ClientEnableState: imds.ClientEnabled,
		// Two attempts, a short backoff: bounded whatever IMDS does.
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 2
			o.MaxBackoff = 200 * time.Millisecond
		}),
	})
	for range imdsReads {
		start := time.Now()
		out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
		if err != nil {
			return fmt.Errorf("get instance-id: %w", err)
		}
		b, err := io.ReadAll(out.Content)
		out.Content.Close()
		if err != nil {
			return err
		}
		fmt.Printf("%s in %s\n", b, time.Since(start).Round(time.Millisecond))
	}
	// A container outlives its requests: stay until stdin closes, so the
	// trace finds the process behind the veth when it ends.
	fmt.Println("done")
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

// imdsChild is the client process while it runs.
type imdsChild struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *strings.Builder
	pid    int
}

// startIMDSClient runs the client in the container's namespace, born in
// cgroup (clone3 CLONE_INTO_CGROUP), and returns once it has made its
// reads; it runs on until stop.
func startIMDSClient(ctx context.Context, t *testing.T, mount, cgroup string, c *lab.Container) (*imdsChild, error) {
	dir, err := os.Open(filepath.Join(mount, cgroup))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", c.Netns(), os.Args[0])
	cmd.Env = append(os.Environ(), imdsClientEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	ch := &imdsChild{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = ch.stderr
	if ch.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start imds client: %w", err)
	}
	r := bufio.NewReader(out)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			ch.stop()
			return nil, fmt.Errorf("imds client: %w: %s", err, ch.stderr.String())
		}
		line = strings.TrimSpace(line)
		if line == "done" {
			break
		}
		lines = append(lines, line)
	}
	if ch.pid, err = strconv.Atoi(lines[0]); err != nil {
		ch.stop()
		return nil, fmt.Errorf("imds client pid %q: %w", lines[0], err)
	}
	t.Logf("imds client (pid %d, cgroup %s): %s", ch.pid, cgroup, strings.Join(lines[1:], "; "))
	return ch, nil
}

// stop ends the client and waits for it.
func (ch *imdsChild) stop() error {
	ch.stdin.Close()
	return ch.cmd.Wait()
}

// traceIMDSClient traces the lab's instance while the client, in a
// container behind it, reads metadata from an IMDS whose token replies
// leave with TTL hopLimit.
func traceIMDSClient(t *testing.T, hopLimit int) (*record.Recording, *analyzer.Result, string, int) {
	t.Helper()
	mount, cgroups := ownertest.Cgroups(t, "imds-client")
	cgroup := cgroups["imds-client"]
	var child *imdsChild
	t.Cleanup(func() {
		if child != nil {
			if err := child.stop(); err != nil {
				t.Errorf("imds client: %v: %s", err, child.stderr.String())
			}
		}
	})
	s := catalog.Scenario{
		Name: "imds-hop-limit",
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.IMDSHopLimit = hopLimit
			return c
		},
		Drive: func(ctx context.Context, l *lab.Lab) (catalog.Truth, error) {
			c, err := l.AddContainer()
			if err != nil {
				return catalog.Truth{}, err
			}
			child, err = startIMDSClient(ctx, t, mount, cgroup, c)
			return catalog.Truth{}, err
		},
	}
	out, err := catalog.Run(context.Background(), s, capture.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return out.Recording, analyzer.Analyze(out.Recording, out.Analysis), cgroup, child.pid
}

func countIMDS(rec *record.Recording, kind record.IMDSKind, ttl uint8) int {
	n := 0
	for _, e := range rec.IMDS {
		if e.Kind == kind && (ttl == 0 || e.TTL == ttl) {
			n++
		}
	}
	return n
}

// TestIMDSHopLimitLab: the SDK's IMDS client in a container (its own
// network namespace and cgroup, forwarded and NATed by the instance) gets
// no token while the token replies leave IMDS with TTL 1: the trace names
// it, with the TTLs and the time exceeded the instance sent back. With a
// hop limit of 2 the tokens get through and nothing is found.
func TestIMDSHopLimitLab(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft")
	t.Run("hop limit 1", func(t *testing.T) {
		rec, res, cgroup, pid := traceIMDSClient(t, 1)
		t.Logf("imds events: %d token requests, %d replies with ttl 1, %d time exceeded, %d gets without token, %d with",
			countIMDS(rec, record.IMDSTokenRequest, 0), countIMDS(rec, record.IMDSReply, 1), countIMDS(rec, record.IMDSTimeExceeded, 0),
			countIMDS(rec, record.IMDSGetNoToken, 0), countIMDS(rec, record.IMDSGetToken, 0))
		var f *analyzer.Finding
		for i := range res.Findings {
			if res.Findings[i].Kind == analyzer.KindIMDSHopLimit {
				if f != nil {
					t.Errorf("a second imds_hop_limit finding: %s", res.Findings[i].Summary)
				}
				f = &res.Findings[i]
			}
		}
		if f == nil {
			t.Fatalf("no imds_hop_limit finding; imds events %+v", rec.IMDS)
		}
		t.Logf("%s", f.Summary)
		d := f.IMDS
		if d.ReplyTTL != 1 || d.TokenRepliesTTL1 == 0 || d.TimeExceeded == 0 || d.GetsWithoutToken == 0 || d.GetsWithToken != 0 || d.WaitedS <= 0 {
			t.Errorf("diagnosis %+v", d)
		}
		if f.Interface != "ens5" {
			t.Errorf("finding on %q, want ens5", f.Interface)
		}
		if d.Owner == nil || d.Owner.Cgroup != cgroup || d.Owner.PID != uint32(pid) || d.Owner.How != owner.HowVeth {
			t.Errorf("client %q owner %+v, want the client process %d in %s by veth", d.Client, d.Owner, pid, cgroup)
		}
		if d.Client != "cgroup "+cgroup {
			t.Errorf("client named %q, want cgroup %s", d.Client, cgroup)
		}
	})
	t.Run("hop limit 2", func(t *testing.T) {
		rec, res, _, _ := traceIMDSClient(t, 2)
		for _, f := range res.Findings {
			if f.Kind == analyzer.KindIMDSHopLimit {
				t.Errorf("imds_hop_limit with hop limit 2: %s", f.Summary)
			}
		}
		// The trace saw the exchange, so the absence means something.
		if countIMDS(rec, record.IMDSTokenRequest, 0) == 0 || countIMDS(rec, record.IMDSReply, 2) == 0 ||
			countIMDS(rec, record.IMDSGetToken, 0) == 0 || countIMDS(rec, record.IMDSTimeExceeded, 0) != 0 {
			t.Errorf("imds events with hop limit 2: %+v", rec.IMDS)
		}
	})
}

// TestIMDSHopLimitScenario: the catalogue's imds-hop-limit scenario shows
// what it says it shows.
func TestIMDSHopLimitScenario(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft")
	s, ok := catalog.Lookup("imds-hop-limit")
	if !ok {
		t.Fatal("no imds-hop-limit scenario")
	}
	out, err := catalog.Run(context.Background(), s, capture.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := analyzer.Analyze(out.Recording, out.Analysis)
	n := 0
	for _, f := range res.Findings {
		if f.Kind != analyzer.KindIMDSHopLimit {
			continue
		}
		n++
		d := f.IMDS
		if d.TokenRequests != 2 || d.TokenRepliesTTL1 != 2 || d.TimeExceeded == 0 || d.GetsWithoutToken != 3 || d.WaitedS < 1 {
			t.Errorf("diagnosis %+v", d)
		}
	}
	if n != 1 {
		t.Errorf("%d imds_hop_limit findings, want 1", n)
	}
}
