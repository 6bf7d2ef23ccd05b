//go:build linux

package owner

import (
	"errors"
	"sync"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
)

// Session is one trace's owner attribution: the cgroup programs (when they
// could start) and the resolver, safe for concurrent use, so that a
// streaming trace ticks it on its own goroutine while bundles are resolved
// on another.
type Session struct {
	mu       sync.Mutex
	tracker  *Tracker // nil when the programs did not start
	resolver *Resolver
	closed   bool // what was read stays, for the last bundles of a stream
}

// StartSession starts the cgroup programs (sockets bounds their map, 0:
// DefaultSockets). When they cannot start, the session still resolves, by
// cgroup, veth and address, and says why in its notes: the error returned
// is for the caller to pass on, not to stop on.
func StartSession(sockets uint32) (*Session, error) {
	t, err := Start(sockets)
	return &Session{tracker: t, resolver: NewResolver(t, err)}, err
}

// Tick reads the owner map, so that a socket the bounded map evicts later
// is still known (a failed read is retried at the next tick), and notes who
// is in the other network namespaces, so that a container that exits is
// still named. A trace calls it every second.
func (s *Session) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tracker != nil && !s.closed {
		_ = s.tracker.Read()
	}
	s.resolver.Observe()
}

// Resolve names the owners of origins and says why others have none.
// final stops the programs first (the end of a trace: they see every
// process of the host, and a socket recorded after the last read would
// count as evicted); otherwise they keep running (a bundle of a streaming
// trace). Either way the map is read first.
func (s *Session) Resolve(origins []loader.FlowOrigin, final bool) ([]record.FlowOwner, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.tracker != nil && !s.closed {
		if final {
			errs = append(errs, s.tracker.Detach())
		}
		errs = append(errs, s.tracker.Read())
	}
	owners, notes := s.resolver.Resolve(origins, final)
	return owners, notes, errors.Join(errs...)
}

// Close stops the programs, reads the map a last time and frees it: a
// Resolve after it names what was read.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tracker == nil || s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.tracker.Detach(), s.tracker.Read(), s.tracker.Close())
}
