package counters

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
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

// CheckEthtoolS checks strictly that r holds `ethtool -S` output: a
// "NIC statistics:" line, then only "name: unsigned integer" lines (blank
// lines aside). ParseEthtoolS skips what it does not know, which suits a
// live read; a file given by hand is checked with this first, so that a
// wrong file fails at once, naming its first bad line, rather than as one
// failed read per sample.
func CheckEthtoolS(r io.Reader) error {
	sc := bufio.NewScanner(r)
	header, stats := false, 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		bad := func(why string) error {
			if len(line) > 60 {
				line = line[:60] + "..."
			}
			return fmt.Errorf("line %d %q: %s (want ethtool -S output: \"NIC statistics:\", then \"name: value\" lines)", n, line, why)
		}
		if !utf8.ValidString(line) || strings.ContainsRune(line, 0) {
			return bad("not text")
		}
		if !header {
			if strings.TrimSpace(line) != "NIC statistics:" {
				return bad(`the first line is not "NIC statistics:"`)
			}
			header = true
			continue
		}
		if _, _, ok := parseStatLine(line); !ok {
			return bad("not a statistic")
		}
		stats++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read ethtool statistics: %w", err)
	}
	if stats == 0 {
		return fmt.Errorf("parse ethtool statistics: %w", ErrNoStatistics)
	}
	return nil
}
