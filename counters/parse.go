package counters

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrNoStatistics is returned by ParseEthtoolS for a text holding no
// statistic at all, such as an ethtool error message or an empty file.
var ErrNoStatistics = errors.New("no statistics found")

// ParseEthtoolS parses the text of `ethtool -S IFACE`: a "NIC statistics:"
// line, then one "name: value" line per statistic. Statistics are taken by
// name, never by position, because the order differs between driver versions.
// Lines that are not "name: unsigned integer" (headers, blank lines, anything
// unknown) are skipped; when a name appears twice the first value is kept.
func ParseEthtoolS(r io.Reader) (map[string]uint64, error) {
	values := make(map[string]uint64)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := parseStatLine(sc.Text())
		if !ok {
			continue
		}
		if _, dup := values[name]; !dup {
			values[name] = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ethtool statistics: %w", err)
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("parse ethtool statistics: %w", ErrNoStatistics)
	}
	return values, nil
}

// parseStatLine splits "   name: 123". The last colon separates name and
// value, so a name with a colon in it still parses.
func parseStatLine(line string) (name string, value uint64, ok bool) {
	i := strings.LastIndexByte(line, ':')
	if i < 0 {
		return "", 0, false
	}
	name = strings.TrimSpace(line[:i])
	if name == "" {
		return "", 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(line[i+1:]), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return name, v, true
}
