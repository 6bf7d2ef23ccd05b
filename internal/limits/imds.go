package limits

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DefaultIMDSEndpoint is the IPv4 instance metadata service.
const DefaultIMDSEndpoint = "http://169.254.169.254"

// DefaultIMDSTimeout bounds one whole Discover: token and all reads.
const DefaultIMDSTimeout = time.Second

// imdsTokenTTL is short: the token is used for a handful of reads right away.
const imdsTokenTTL = "60"

// maxIMDSBody caps what one answer may hold; metadata values are short.
const maxIMDSBody = 64 << 10

// Instance is what IMDS says about the instance enaprobe runs on.
type Instance struct {
	InstanceType       string
	PlacementGroup     string // "" when IMDS answers 404: not in a placement group
	AvailabilityZoneID string // e.g. use1-az4
	MAC                string // primary interface
	InterfaceID        string // eni-...
	VPCCIDRs           []netip.Prefix
	SubnetCIDR         netip.Prefix
	// Requests is how many HTTP requests Discover sent, to report the
	// link-local packets it spent.
	Requests int
}

// IMDS reads instance metadata with IMDSv2, once.
//
// Every request to IMDS is several packets (a TCP exchange with
// 169.254.169.254) and they count against the interface's link-local
// allowance of LinkLocalPPSPerInterface packets/s, shared with the DNS
// resolver and NTP; IMDS is also throttled per instance. So Discover sends one
// token PUT and seven GETs over one kept-alive connection, never retries,
// and remembers its result, error included: a second Discover on the same
// value returns the remembered result and sends nothing. Use a new IMDS value
// to ask again.
//
// There is no IMDSv1 fallback: if the token PUT fails (refused with 401, 403,
// 404 or 405, or unanswered, which is what a hop limit of 1 looks like from a
// container) Discover returns an error saying IMDSv2 failed, instead of
// sending token-less GETs the instance may be configured to reject.
type IMDS struct {
	Endpoint string        // DefaultIMDSEndpoint when empty
	Timeout  time.Duration // DefaultIMDSTimeout when <= 0
	// Client defaults to one that ignores proxy settings (a proxy cannot
	// reach a link-local address) and follows no redirects.
	Client *http.Client

	mu   sync.Mutex
	done bool
	inst Instance
	err  error
}

// Discover returns the instance's type, placement, zone and primary
// interface network, reading IMDS on the first call only.
func (m *IMDS) Discover(ctx context.Context) (Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.done {
		m.inst, m.err = m.discover(ctx)
		m.done = true
	}
	inst := m.inst
	inst.VPCCIDRs = append([]netip.Prefix(nil), m.inst.VPCCIDRs...)
	return inst, m.err
}

func (m *IMDS) discover(ctx context.Context) (Instance, error) {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultIMDSTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s := imdsSession{endpoint: strings.TrimSuffix(m.Endpoint, "/"), client: m.Client}
	if s.endpoint == "" {
		s.endpoint = DefaultIMDSEndpoint
	}
	if s.client == nil {
		s.client = defaultIMDSClient()
	}

	var inst Instance
	err := s.token(ctx, timeout)
	if err == nil {
		err = s.read(ctx, &inst)
	}
	inst.Requests = s.requests
	if err != nil {
		return inst, fmt.Errorf("imds %s: %w", s.endpoint, err)
	}
	return inst, nil
}

func defaultIMDSClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{}).DialContext,
			MaxIdleConnsPerHost: 1,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// imdsSession is one Discover's token and request count.
type imdsSession struct {
	endpoint string
	client   *http.Client
	tok      string
	requests int
}

func (s *imdsSession) token(ctx context.Context, timeout time.Duration) error {
	body, status, err := s.do(ctx, http.MethodPut, "/latest/api/token",
		"X-aws-ec2-metadata-token-ttl-seconds", imdsTokenTTL)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("IMDSv2 token PUT got no answer within %v (from a container this is the "+
			"signature of HttpPutResponseHopLimit 1); not falling back to IMDSv1: %w", timeout, err)
	case err != nil:
		return fmt.Errorf("IMDSv2 token PUT failed; not falling back to IMDSv1: %w", err)
	case status != http.StatusOK:
		return fmt.Errorf("IMDSv2 token PUT refused with HTTP %d %s; not falling back to IMDSv1",
			status, http.StatusText(status))
	}
	s.tok = strings.TrimSpace(body)
	if s.tok == "" {
		return errors.New("IMDSv2 token PUT returned an empty token")
	}
	return nil
}

func (s *imdsSession) read(ctx context.Context, inst *Instance) error {
	var err error
	if inst.InstanceType, err = s.get(ctx, "instance-type", false); err != nil {
		return err
	}
	if inst.PlacementGroup, err = s.get(ctx, "placement/group-name", true); err != nil {
		return err
	}
	if inst.AvailabilityZoneID, err = s.get(ctx, "placement/availability-zone-id", false); err != nil {
		return err
	}
	if inst.MAC, err = s.get(ctx, "mac", false); err != nil {
		return err
	}
	// The MAC goes into the next paths: accept nothing but a MAC.
	if hw, perr := net.ParseMAC(inst.MAC); perr != nil || len(hw) != 6 {
		return fmt.Errorf("mac %q is not a MAC address", inst.MAC)
	}
	iface := "network/interfaces/macs/" + inst.MAC + "/"
	vpc, err := s.get(ctx, iface+"vpc-ipv4-cidr-blocks", false)
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(vpc) {
		p, perr := netip.ParsePrefix(f)
		if perr != nil {
			return fmt.Errorf("vpc-ipv4-cidr-blocks: %w", perr)
		}
		inst.VPCCIDRs = append(inst.VPCCIDRs, p)
	}
	if len(inst.VPCCIDRs) == 0 {
		return errors.New("vpc-ipv4-cidr-blocks is empty")
	}
	subnet, err := s.get(ctx, iface+"subnet-ipv4-cidr-block", false)
	if err != nil {
		return err
	}
	if inst.SubnetCIDR, err = netip.ParsePrefix(subnet); err != nil {
		return fmt.Errorf("subnet-ipv4-cidr-block: %w", err)
	}
	inst.InterfaceID, err = s.get(ctx, iface+"interface-id", false)
	return err
}

// get reads one metadata path. With notFoundEmpty a 404 means "none".
func (s *imdsSession) get(ctx context.Context, path string, notFoundEmpty bool) (string, error) {
	body, status, err := s.do(ctx, http.MethodGet, "/latest/meta-data/"+path,
		"X-aws-ec2-metadata-token", s.tok)
	switch {
	case err != nil:
		return "", fmt.Errorf("get %s: %w", path, err)
	case status == http.StatusNotFound && notFoundEmpty:
		return "", nil
	case status != http.StatusOK:
		return "", fmt.Errorf("get %s: HTTP %d %s", path, status, http.StatusText(status))
	}
	return strings.TrimSpace(body), nil
}

func (s *imdsSession) do(ctx context.Context, method, path, header, value string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.endpoint+path, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set(header, value)
	s.requests++
	resp, err := s.client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxIMDSBody+1))
	if err != nil {
		return "", resp.StatusCode, err
	}
	if len(b) > maxIMDSBody {
		return "", resp.StatusCode, fmt.Errorf("%s answer longer than %d bytes", path, maxIMDSBody)
	}
	return string(b), resp.StatusCode, nil
}
