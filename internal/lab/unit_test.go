package lab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPaceSendsEachOnceOnSchedule(t *testing.T) {
	var got []int
	start := time.Now()
	err := pace(context.Background(), 50, 2*time.Millisecond, func(k int) error {
		got = append(got, k)
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range got {
		if k != i {
			t.Fatalf("call %d got k=%d", i, k)
		}
	}
	if len(got) != 50 {
		t.Fatalf("%d calls, want 50", len(got))
	}
	if elapsed < 95*time.Millisecond || elapsed > time.Second {
		t.Errorf("50 calls at 2 ms took %v, want about 100 ms", elapsed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pace(ctx, 10, time.Millisecond, func(int) error { return nil }); err == nil {
		t.Error("pace ignored a cancelled context")
	}
}

// TestPaceSteadySkipsLateSends: a wake 20 ms late at 1 ms a packet sends
// the two latest packets due (2 ms of them), not all twenty. The stall is
// at the first packet from the sixth on: a host that descheduled the test
// 3 ms skipped the sixth itself (a CI run: 39 sent, 1 skipped, no stall).
func TestPaceSteadySkipsLateSends(t *testing.T) {
	var got []int
	stalled := false
	skipped, err := paceSteady(context.Background(), 40, time.Millisecond, func(k int) error {
		got = append(got, k)
		if k >= 5 && !stalled {
			stalled = true
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if skipped < 15 || len(got)+skipped != 40 {
		t.Errorf("sent %d, skipped %d after a 20 ms stall at 1 ms: want about 18 skipped, 40 in all", len(got), skipped)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("sends out of order: %v", got)
		}
	}
}

func TestNftRulesetCarriesTheConfig(t *testing.T) {
	l := &Lab{cfg: Config{PPS: 1234, PPSBurst: 56, LinkLocalPPS: 1024, LinkLocalBurst: 64, ConntrackMax: 777,
		InRate: 8_000_000, InBurst: 4096, OutRate: 16_000_000, OutBurst: 8192}.withDefaults()}
	b, err := l.nftRuleset(nftTemplate, vpcIfc)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := l.nftRuleset(nftInstanceTemplate, instanceIfc)
	if err != nil {
		t.Fatal(err)
	}
	rules := string(b) + string(inst)
	for _, want := range []string{
		"limit pps { rate over 1234/second burst 56 packets }",
		"limit linklocal { rate over 1024/second burst 64 packets }",
		"elements = { 169.254.169.0/24, 198.18.0.2 }",
		"elements = { fd00:ec2::254, fd00:ec2::253, fd00:ec2::123 }",
		`iifname ct count over 777`, `oifname ct count over 777`,
		`hook ingress device "vpc0"`, `hook egress device "vpc0"`,
		"limit bw_in { rate over 1000000 bytes/second burst 4096 bytes }",
		"limit bw_out { rate over 2000000 bytes/second burst 8192 bytes }",
		`hook egress device "ens5"`,
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("ruleset lacks %q", want)
		}
	}
}

func TestIMDSHandler(t *testing.T) {
	svc := &imds{hopLimit: 1, v2Required: true, tokens: map[string]time.Time{}, metadata: map[string]string{
		"instance-type": "c5.large", "placement/availability-zone-id": "lab1-az1",
	}}
	do := func(method, path string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, req)
		return w
	}
	if w := do(http.MethodGet, "/latest/meta-data/instance-type", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("v2 required, no token: %d", w.Code)
	}
	if w := do(http.MethodPut, "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "21601"}); w.Code != http.StatusBadRequest {
		t.Errorf("ttl over 6 h: %d", w.Code)
	}
	if w := do(http.MethodPut, "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "5", "X-Forwarded-For": "10.0.0.1"}); w.Code != http.StatusForbidden {
		t.Errorf("proxied token request: %d", w.Code)
	}
	w := do(http.MethodPut, "/latest/api/token", map[string]string{IMDSTokenTTLHeader: "5"})
	tok := w.Body.String()
	if w.Code != http.StatusOK || len(tok) < 40 || w.Header().Get(IMDSTokenTTLHeader) != "5" {
		t.Fatalf("token: %d %q", w.Code, tok)
	}
	if w := do(http.MethodGet, "/latest/meta-data/instance-type", map[string]string{IMDSTokenHeader: tok}); w.Code != http.StatusOK || w.Body.String() != "c5.large" {
		t.Errorf("with token: %d %q", w.Code, w.Body.String())
	}
	if w := do(http.MethodGet, "/latest/meta-data/instance-type", map[string]string{IMDSTokenHeader: "forged"}); w.Code != http.StatusUnauthorized {
		t.Errorf("forged token: %d", w.Code)
	}
	if w := do(http.MethodGet, "/latest/meta-data/placement/", map[string]string{IMDSTokenHeader: tok}); w.Body.String() != "availability-zone-id" {
		t.Errorf("placement listing %q", w.Body.String())
	}
}

func TestNTPReplyRejectsNonClients(t *testing.T) {
	req := ntpRequest(0)
	req[0] = 4<<3 | ntpModeServer
	if _, ok := ntpReply(req, time.Now()); ok {
		t.Error("answered a server-mode packet")
	}
	if _, ok := ntpReply(make([]byte, 20), time.Now()); ok {
		t.Error("answered a short packet")
	}
}

// TestMIBCounter: a counter of a /proc/net MIB file is read from its
// group's pair of lines, whichever other groups come first, and a name
// that is not there says so.
func TestMIBCounter(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/netstat"
	const netstat = "TcpExt: SyncookiesSent TCPLossProbes TCPLossProbeRecovery\n" +
		"TcpExt: 0 17 3\n" +
		"IpExt: InNoRoutes TCPLossProbes\n" +
		"IpExt: 5 99\n"
	if err := os.WriteFile(path, []byte(netstat), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := mibCounter(path, "TcpExt:", "TCPLossProbes"); err != nil || n != 17 {
		t.Errorf("TcpExt TCPLossProbes = %d, %v; want 17", n, err)
	}
	if n, err := mibCounter(path, "IpExt:", "InNoRoutes"); err != nil || n != 5 {
		t.Errorf("IpExt InNoRoutes = %d, %v; want 5", n, err)
	}
	if _, err := mibCounter(path, "Tcp:", "RetransSegs"); err == nil {
		t.Error("a group the file does not have read as a value")
	}
	// The running kernel's own files, as the impact scenarios read them.
	c, err := readTCPCounts()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this namespace: %d segments sent again, %d tail loss probes", c.RetransSegs, c.LossProbes)
}
