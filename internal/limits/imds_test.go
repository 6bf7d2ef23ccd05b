package limits

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeIMDS is an IMDSv2 server on loopback. Tests never reach 169.254.169.254.
type fakeIMDS struct {
	mu       sync.Mutex
	requests []string          // "METHOD path"
	token    string            // what the token PUT hands out
	accept   string            // the token GETs must carry; token when empty
	meta     map[string]string // path under /latest/meta-data/ -> body; absent -> 404
	putCode  int               // non-zero: answer the token PUT with this status
	badTTL   bool              // a PUT arrived without the TTL header
	badToken []string          // GETs that arrived without the right token
}

const testMAC = "0e:12:34:56:78:9a"

func newFakeIMDS() *fakeIMDS {
	iface := "network/interfaces/macs/" + testMAC + "/"
	return &fakeIMDS{
		token: "AQAEAFAKE-token==",
		meta: map[string]string{
			"instance-type":                  "c6i.large",
			"placement/availability-zone-id": "use1-az4",
			"mac":                            testMAC,
			iface + "vpc-ipv4-cidr-blocks":   "10.0.0.0/16\n100.64.0.0/20",
			iface + "subnet-ipv4-cidr-block": "10.0.3.0/24",
			iface + "interface-id":           "eni-0123456789abcdef0",
		},
	}
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	switch {
	case r.URL.Path == "/latest/api/token":
		if r.Method != http.MethodPut {
			http.Error(w, "", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") != "60" {
			f.badTTL = true
		}
		if f.putCode != 0 {
			http.Error(w, "", f.putCode)
			return
		}
		w.Write([]byte(f.token))
	case strings.HasPrefix(r.URL.Path, "/latest/meta-data/"):
		accept := f.accept
		if accept == "" {
			accept = f.token
		}
		if r.Method != http.MethodGet || r.Header.Get("X-aws-ec2-metadata-token") != accept {
			f.badToken = append(f.badToken, r.URL.Path)
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		body, ok := f.meta[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeIMDS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func startIMDS(t *testing.T, h http.Handler) *IMDS {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server is not on loopback: %s", srv.URL)
	}
	return &IMDS{Endpoint: srv.URL, Timeout: 2 * time.Second}
}

func TestDiscoverTokenFlow(t *testing.T) {
	f := newFakeIMDS()
	m := startIMDS(t, f)
	inst, err := m.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Instance{
		InstanceType:       "c6i.large",
		PlacementGroup:     "", // group-name answered 404
		AvailabilityZoneID: "use1-az4",
		MAC:                testMAC,
		InterfaceID:        "eni-0123456789abcdef0",
		VPCCIDRs:           []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/20")},
		SubnetCIDR:         netip.MustParsePrefix("10.0.3.0/24"),
		Requests:           8,
	}
	if inst.InstanceType != want.InstanceType || inst.PlacementGroup != want.PlacementGroup ||
		inst.AvailabilityZoneID != want.AvailabilityZoneID || inst.MAC != want.MAC ||
		inst.InterfaceID != want.InterfaceID || inst.SubnetCIDR != want.SubnetCIDR ||
		inst.Requests != want.Requests || len(inst.VPCCIDRs) != 2 ||
		inst.VPCCIDRs[0] != want.VPCCIDRs[0] || inst.VPCCIDRs[1] != want.VPCCIDRs[1] {
		t.Errorf("Discover = %+v\nwant       %+v", inst, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.requests[0] != "PUT /latest/api/token" {
		t.Errorf("first request %q, want the token PUT", f.requests[0])
	}
	if n := strings.Count(strings.Join(f.requests, "\n"), "PUT "); n != 1 {
		t.Errorf("%d token PUTs, want 1: %q", n, f.requests)
	}
	if f.badTTL || len(f.badToken) > 0 {
		t.Errorf("TTL header missing: %v; GETs without the token: %q", f.badTTL, f.badToken)
	}
	if len(f.requests) != 8 {
		t.Errorf("server saw %d requests, want 8: %q", len(f.requests), f.requests)
	}
}

func TestDiscoverPlacementGroup(t *testing.T) {
	f := newFakeIMDS()
	f.meta["placement/group-name"] = "pg-low-latency"
	inst, err := startIMDS(t, f).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inst.PlacementGroup != "pg-low-latency" {
		t.Errorf("PlacementGroup = %q", inst.PlacementGroup)
	}
}

func TestDiscoverCaches(t *testing.T) {
	f := newFakeIMDS()
	m := startIMDS(t, f)
	first, err := m.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sent := f.count()
	first.VPCCIDRs[0] = netip.Prefix{} // a caller scribbling on its copy
	second, err := m.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != sent {
		t.Errorf("second Discover sent %d more requests", f.count()-sent)
	}
	if second.InstanceType != "c6i.large" || second.VPCCIDRs[0] != netip.MustParsePrefix("10.0.0.0/16") {
		t.Errorf("cached result changed: %+v", second)
	}
}

// Without IMDSv2 there is no fallback: the error says so and no GET is sent.
func TestDiscoverTokenRefused(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed} {
		f := newFakeIMDS()
		f.putCode = code
		m := startIMDS(t, f)
		_, err := m.Discover(context.Background())
		if err == nil || !strings.Contains(err.Error(), "IMDSv2") || !strings.Contains(err.Error(), "not falling back to IMDSv1") {
			t.Errorf("HTTP %d: err = %v, want an IMDSv2 failure without fallback", code, err)
		}
		if f.count() != 1 {
			t.Errorf("HTTP %d: %d requests sent, want only the PUT", code, f.count())
		}
		// The failure is remembered too: nothing more goes out.
		if _, err2 := m.Discover(context.Background()); err2 == nil || f.count() != 1 {
			t.Errorf("HTTP %d: second Discover err=%v after %d requests", code, err2, f.count())
		}
	}
}

func TestDiscoverRejectedToken(t *testing.T) {
	f := newFakeIMDS()
	f.accept = "another-token" // every GET is answered 401, as with an expired token
	_, err := startIMDS(t, f).Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), "get instance-type: HTTP 401") {
		t.Errorf("err = %v, want the 401 of the first GET", err)
	}
	if f.count() != 2 {
		t.Errorf("%d requests, want the PUT and one GET", f.count())
	}
}

// A server that never answers: Discover gives up within its timeout.
func TestDiscoverTimeout(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	m := startIMDS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the server closes
	m.Timeout = 150 * time.Millisecond
	start := time.Now()
	_, err := m.Discover(context.Background())
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer within 150ms") {
		t.Errorf("err = %v, want a timeout of the token PUT", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Discover took %v with a 150ms timeout", elapsed)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("%d requests reached the server, want 1 (no retry)", calls)
	}
}

func TestDiscoverBadAnswers(t *testing.T) {
	iface := "network/interfaces/macs/" + testMAC + "/"
	for name, edit := range map[string]func(*fakeIMDS){
		"mac not a MAC":        func(f *fakeIMDS) { f.meta["mac"] = "../../../user-data" },
		"no instance type":     func(f *fakeIMDS) { delete(f.meta, "instance-type") },
		"no zone id":           func(f *fakeIMDS) { delete(f.meta, "placement/availability-zone-id") },
		"bad vpc cidr":         func(f *fakeIMDS) { f.meta[iface+"vpc-ipv4-cidr-blocks"] = "10.0.0.0/33" },
		"empty vpc cidrs":      func(f *fakeIMDS) { f.meta[iface+"vpc-ipv4-cidr-blocks"] = "" },
		"bad subnet":           func(f *fakeIMDS) { f.meta[iface+"subnet-ipv4-cidr-block"] = "subnet" },
		"no interface id":      func(f *fakeIMDS) { delete(f.meta, iface+"interface-id") },
		"empty token":          func(f *fakeIMDS) { f.token = "" },
		"oversized answer":     func(f *fakeIMDS) { f.meta["instance-type"] = strings.Repeat("x", maxIMDSBody+1) },
		"group-name forbidden": nil, // filled below: only 404 means "no group"
	} {
		f := newFakeIMDS()
		if edit != nil {
			edit(f)
		}
		h := http.Handler(f)
		if name == "group-name forbidden" {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/latest/meta-data/placement/group-name" {
					http.Error(w, "", http.StatusForbidden)
					return
				}
				f.ServeHTTP(w, r)
			})
		}
		if _, err := startIMDS(t, h).Discover(context.Background()); err == nil {
			t.Errorf("%s: Discover succeeded", name)
		}
	}
}

func TestIMDSDefaults(t *testing.T) {
	if DefaultIMDSEndpoint != "http://"+IMDSv4.String() {
		t.Errorf("DefaultIMDSEndpoint = %q", DefaultIMDSEndpoint)
	}
	c := defaultIMDSClient()
	if c.Transport.(*http.Transport).Proxy != nil {
		t.Error("default client would use a proxy for a link-local address")
	}
}
