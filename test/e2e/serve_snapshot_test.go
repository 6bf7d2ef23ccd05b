//go:build linux

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/lab"
)

// post sends POST /snapshot to addr with client and returns the status,
// the Retry-After header and the body.
func postSnapshot(t *testing.T, client *http.Client, addr string) (int, string, string) {
	t.Helper()
	resp, err := client.Post("http://"+addr+"/snapshot", "", nil)
	if err != nil {
		t.Fatalf("POST %s/snapshot: %v", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b))
}

// fromVPC is a client whose connections come from the lab's VPC namespace:
// another host of the network, to serve.
func fromVPC(l *lab.Lab) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var conn net.Conn
			err := l.InVPC(func() error {
				var d net.Dialer
				var err error
				conn, err = d.DialContext(ctx, network, address)
				return err
			})
			return conn, err
		}}}
}

// TestServeSnapshotAPI: serve listening on every address of the instance
// answers POST /snapshot from loopback (200, a bundle) but not from another
// host of the VPC (403, no bundle), while /metrics answers both; a second
// request within --snapshot-gap is refused with 429 and Retry-After; with
// --enable-snapshot-api the other host's request is answered, and limited
// the same.
func TestServeSnapshotAPI(t *testing.T) {
	port := func(s *servedLab) string {
		ap, err := netip.ParseAddrPort(s.addr)
		if err != nil {
			t.Fatalf("serve's address %q: %v", s.addr, err)
		}
		return strconv.Itoa(int(ap.Port()))
	}
	t.Run("loopback only", func(t *testing.T) {
		s := startServedLab(t, "--history", "2s", "--listen", "0.0.0.0:0", "--snapshot-gap", "1h")
		p := port(s)
		remote, local := net.JoinHostPort(lab.InstanceAddr.String(), p), net.JoinHostPort("127.0.0.1", p)
		vpc := fromVPC(s.l)
		if code, _, body := postSnapshot(t, vpc, remote); code != http.StatusForbidden || !strings.Contains(body, "--enable-snapshot-api") {
			t.Errorf("POST /snapshot from the VPC: %d %q, want 403 naming --enable-snapshot-api", code, body)
		}
		resp, err := vpc.Get("http://" + remote + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /metrics from the VPC: %d, want 200", resp.StatusCode)
		}
		if n := len(bundles(t, s.dir)); n != 0 {
			t.Errorf("%d bundles after a refused request, want none", n)
		}
		code, _, body := postSnapshot(t, s.client, local)
		if code != http.StatusOK {
			t.Fatalf("POST /snapshot from loopback: %d %q\n%s", code, body, s.stderr)
		}
		if _, err := os.Stat(body); err != nil {
			t.Errorf("POST /snapshot answered %q: %v", body, err)
		}
		code, retry, body := postSnapshot(t, s.client, local)
		if secs, err := strconv.Atoi(retry); code != http.StatusTooManyRequests || err != nil || secs < 3500 || secs > 3600 {
			t.Errorf("a second POST /snapshot within --snapshot-gap 1h: %d, Retry-After %q, %q; want 429 and about 3600", code, retry, body)
		}
		if n := len(bundles(t, s.dir)); n != 1 {
			t.Errorf("%d bundles, want the one snapshot", n)
		}
		s.stop(t)
	})
	t.Run("enabled", func(t *testing.T) {
		s := startServedLab(t, "--history", "2s", "--listen", "0.0.0.0:0", "--snapshot-gap", "1h", "--enable-snapshot-api")
		remote := net.JoinHostPort(lab.InstanceAddr.String(), port(s))
		vpc := fromVPC(s.l)
		if code, _, body := postSnapshot(t, vpc, remote); code != http.StatusOK {
			t.Fatalf("POST /snapshot from the VPC with --enable-snapshot-api: %d %q\n%s", code, body, s.stderr)
		}
		if code, retry, _ := postSnapshot(t, vpc, remote); code != http.StatusTooManyRequests || retry == "" {
			t.Errorf("a second POST /snapshot from the VPC: %d, Retry-After %q; want 429 with it", code, retry)
		}
		s.stop(t)
	})
}
