//go:build linux

package catalog

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/enaprobe/enaprobe/internal/lab"
)

// imdsHopLimit is a container whose IMDSv2 token replies die one hop short
// (the lab's hop limit of 1): its client asks for a token twice, waiting a
// second each time, then falls back to IMDSv1, as SDKs do by default.
func imdsHopLimit() Scenario {
	return Scenario{
		Name:    "imds-hop-limit",
		Summary: "an IMDSv2 client in a container behind the instance (veth, forwarded, NATed) with the IMDS hop limit at 1",
		Expect:  "one imds_hop_limit: token replies with TTL 1, the instance's time exceeded toward IMDS, the client's retry and its IMDSv1 fallback",
		Lab: func() lab.Config {
			c := lab.DefaultConfig()
			c.IMDSHopLimit = 1
			return c
		},
		Drive: func(ctx context.Context, l *lab.Lab) (Truth, error) {
			c, err := l.AddContainer()
			if err != nil {
				return Truth{}, err
			}
			return Truth{Notes: []string{fmt.Sprintf("IMDS client in container %s, NATed to %s", c.Addr, lab.InstanceAddr)}},
				imdsClient(ctx, c)
		},
	}
}

// imdsClient reads the instance id as an SDK does: a token first (PUT,
// 1 s timeout, two attempts), then the GET with it, or without one when no
// token came. Bounded: five requests of at most a second each.
func imdsClient(ctx context.Context, c *lab.Container) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext:       c.Dial,
		DisableKeepAlives: true,
	}}
	const base = "http://169.254.169.254"
	var token string
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", nil)
		if err != nil {
			return err
		}
		req.Header.Set(lab.IMDSTokenTTLHeader, "21600")
		resp, err := hc.Do(req)
		if err != nil {
			continue // the reply died on the way: try again, then fall back
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			token = strings.TrimSpace(string(b))
			break
		}
	}
	for range 3 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/latest/meta-data/instance-id", nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set(lab.IMDSTokenHeader, token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("imds client: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("imds client: GET instance-id: %s", resp.Status)
		}
	}
	return nil
}
