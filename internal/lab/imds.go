package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/enaprobe/enaprobe/internal/limits"
	"golang.org/x/sys/unix"
)

// IMDS header names (IMDSv2).
const (
	IMDSTokenHeader    = "X-aws-ec2-metadata-token"
	IMDSTokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	imdsMaxTokenTTL    = 21600
	imdsPort           = 80
	imdsTokenPath      = "/latest/api/token"
)

var imdsAddrs = []netip.Addr{limits.IMDSv4, limits.IMDSv6}

// imds is the instance metadata service: IMDSv2 tokens whose PUT response
// leaves with the IP TTL set to the hop limit, and a small metadata tree.
type imds struct {
	hopLimit   int
	v2Required bool
	metadata   map[string]string // path under /latest/meta-data/ -> value

	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry
}

type connKey struct{}

func (l *Lab) imdsMetadata() map[string]string {
	mac := l.instLink.Attrs().HardwareAddr.String()
	eni := "network/interfaces/macs/" + mac + "/"
	return map[string]string{
		"instance-id":                    "i-0" + l.id + "1ab",
		"instance-type":                  l.cfg.InstanceType,
		"local-ipv4":                     InstanceAddr.String(),
		"mac":                            mac,
		"placement/availability-zone":    "lab-1a",
		"placement/availability-zone-id": "lab1-az1",
		"placement/region":               "lab-1",
		eni + "device-number":            "0",
		eni + "interface-id":             "eni-0" + l.id + "1ab",
		eni + "local-ipv4s":              InstanceAddr.String(),
		eni + "ipv6s":                    InstanceAddr6.String(),
		eni + "subnet-ipv4-cidr-block":   SubnetCIDR.String(),
		eni + "vpc-ipv4-cidr-block":      VPCCIDR.String(),
		eni + "vpc-ipv4-cidr-blocks":     VPCCIDR.String(),
		eni + "subnet-ipv6-cidr-blocks":  "2001:2:0:1::/64",
		eni + "vpc-id":                   "vpc-0" + l.id + "1ab",
		IMDSCredentialsPath[len("/latest/meta-data/"):]: `{"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIALAB","SecretAccessKey":"lab","Token":"lab","Expiration":"2099-01-01T00:00:00Z"}`,
	}
}

// IMDSRole is the lab instance's role, whose credentials IMDS serves at
// IMDSCredentialsPath.
const (
	IMDSRole            = "lab-instance-role"
	IMDSCredentialsPath = "/latest/meta-data/iam/security-credentials/" + IMDSRole
)

func (l *Lab) startIMDS() error {
	svc := &imds{hopLimit: l.cfg.IMDSHopLimit, v2Required: l.cfg.IMDSv2Required, metadata: l.imdsMetadata(), tokens: map[string]time.Time{}}
	lns, err := l.listenVPC(imdsAddrs, imdsPort)
	if err != nil {
		return err
	}
	for _, ln := range lns {
		srv := &http.Server{
			Handler:           svc,
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       30 * time.Second,
			// The handler needs the connection to set its IP TTL.
			ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		}
		l.services.goServe(func() { srv.Serve(ln) })
		l.services.onClose(srv.Close)
	}
	return nil
}

func (s *imds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "EC2ws")
	// PUT responses leave with TTL = hop limit, so a client one hop
	// further (a container behind NAT) never gets its token; the rest
	// with the default TTL. Set per request, before anything is written,
	// so retransmissions of a response keep its TTL.
	ttl := -1
	if r.Method == http.MethodPut {
		ttl = s.hopLimit
	}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		if err := setConnTTL(c, ttl); err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	if r.URL.Path == imdsTokenPath {
		s.serveToken(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if tok := r.Header.Get(IMDSTokenHeader); tok != "" {
		if !s.validToken(tok) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	} else if s.v2Required {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	const root = "/latest/meta-data/"
	if !strings.HasPrefix(r.URL.Path+"/", root) {
		http.NotFound(w, r)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, root)
	if v, ok := s.metadata[path]; ok {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, v)
		return
	}
	if list := s.listing(path); list != "" {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, list)
		return
	}
	http.NotFound(w, r)
}

// listing is the directory listing IMDS returns for a path prefix:
// children one per line, sub-directories with a trailing slash.
func (s *imds) listing(dir string) string {
	dir = strings.TrimSuffix(dir, "/")
	if dir != "" {
		dir += "/"
	}
	seen := map[string]bool{}
	for p := range s.metadata {
		if rest, ok := strings.CutPrefix(p, dir); ok {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i+1]
			}
			seen[rest] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

func (s *imds) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// IMDS refuses token requests that went through a proxy.
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(IMDSTokenTTLHeader))
	if err != nil || ttl < 1 || ttl > imdsMaxTokenTTL {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var raw [40]byte
	if _, err := rand.Read(raw[:]); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	s.mu.Lock()
	now := time.Now()
	for t, exp := range s.tokens {
		if now.After(exp) {
			delete(s.tokens, t)
		}
	}
	s.tokens[tok] = now.Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(IMDSTokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	// A length, not chunked encoding, so nothing is written after return.
	w.Header().Set("Content-Length", strconv.Itoa(len(tok)))
	io.WriteString(w, tok)
}

func (s *imds) validToken(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

// setConnTTL sets the unicast TTL (IPv4) or hop limit (IPv6) of c's
// socket; -1 means the namespace default.
func setConnTTL(c net.Conn, ttl int) error {
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("set ttl: %T is not a TCP connection", c)
	}
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	raw, err := tcp.SyscallConn()
	if err != nil {
		return fmt.Errorf("set ttl: %w", err)
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if local.Addr().Unmap().Is4() {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, ttl)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, ttl)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("set ttl %d: %w", ttl, err)
	}
	return nil
}
