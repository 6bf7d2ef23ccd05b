package limits

import (
	"bufio"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/enaprobe/enaprobe/internal/suggest"
	"github.com/enaprobe/enaprobe/internal/units"
)

// InstanceType is the network allowance of one EC2 instance type.
type InstanceType struct {
	Name  string
	VCPUs int // 0 when unknown (a type added by Override)
	// BaselineGbps is the bandwidth the instance sustains indefinitely.
	BaselineGbps float64
	// PeakGbps is the burst ceiling of a Burstable type; for the others it
	// equals BaselineGbps, as they have no burst.
	PeakGbps float64
	// Burstable marks sizes sold as "Up to PeakGbps": they exceed the
	// baseline only while network I/O credits last.
	Burstable bool
}

//go:embed data/instance_types.csv
var embeddedCSV string

// Table maps instance type names to their allowances. The zero value is
// empty; Default returns a copy of the embedded snapshot that callers may
// amend (for example from --baseline/--burst flags) without touching
// anybody else's copy.
type Table struct {
	types      map[string]InstanceType
	provenance string
	overrides  []string // one line per Override, in call order
}

var embedded = sync.OnceValues(func() (*Table, error) {
	return ParseTable(strings.NewReader(embeddedCSV))
})

// Default returns a private copy of the embedded table. It panics only if the
// embedded file is malformed, which the package tests rule out.
func Default() *Table {
	t, err := embedded()
	if err != nil {
		panic(fmt.Sprintf("limits: embedded instance table: %v", err))
	}
	return t.Clone()
}

// Lookup finds name in the embedded table.
func Lookup(name string) (InstanceType, bool) {
	t, err := embedded()
	if err != nil {
		return InstanceType{}, false
	}
	return t.Lookup(name)
}

// Nearest lists the embedded table's instance types a mistyped name was
// probably meant to be (Table.Nearest).
func Nearest(name string) []string {
	t, err := embedded()
	if err != nil {
		return nil
	}
	return t.Nearest(name)
}

// Provenance says where the embedded table's numbers come from and when
// they were taken, for reports to print beside any number from it.
func Provenance() string {
	t, err := embedded()
	if err != nil {
		return "embedded instance table unreadable: " + err.Error()
	}
	return t.Provenance()
}

// ParseTable reads the CSV format of data/instance_types.csv: leading lines
// starting with '#' are the provenance, then the header
// name,vcpus,baseline_gbps,peak_gbps,burstable and one row per type.
func ParseTable(r io.Reader) (*Table, error) {
	br := bufio.NewReader(r)
	var prov []string
	for {
		b, err := br.Peek(1)
		if err != nil || b[0] != '#' {
			break
		}
		line, err := br.ReadString('\n')
		prov = append(prov, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")))
		if err != nil {
			break
		}
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = 5
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read instance table header: %w", err)
	}
	want := []string{"name", "vcpus", "baseline_gbps", "peak_gbps", "burstable"}
	if strings.Join(header, ",") != strings.Join(want, ",") {
		return nil, fmt.Errorf("instance table header %q, want %q", header, want)
	}
	t := &Table{types: map[string]InstanceType{}, provenance: strings.Join(prov, "\n")}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read instance table: %w", err)
		}
		it, err := parseRow(rec)
		if err != nil {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("instance table line %d: %w", line, err)
		}
		if _, dup := t.types[it.Name]; dup {
			return nil, fmt.Errorf("instance table: %s listed twice", it.Name)
		}
		t.types[it.Name] = it
	}
	return t, nil
}

func parseRow(rec []string) (InstanceType, error) {
	it := InstanceType{Name: normalizeName(rec[0])}
	if it.Name == "" {
		return it, errors.New("empty instance type name")
	}
	var err error
	if it.VCPUs, err = strconv.Atoi(rec[1]); err != nil || it.VCPUs <= 0 {
		return it, fmt.Errorf("%s: bad vcpus %q", it.Name, rec[1])
	}
	if it.BaselineGbps, err = parseGbps(rec[2]); err != nil {
		return it, fmt.Errorf("%s: baseline: %w", it.Name, err)
	}
	if it.PeakGbps, err = parseGbps(rec[3]); err != nil {
		return it, fmt.Errorf("%s: peak: %w", it.Name, err)
	}
	if it.Burstable, err = strconv.ParseBool(rec[4]); err != nil {
		return it, fmt.Errorf("%s: bad burstable %q", it.Name, rec[4])
	}
	// A row whose flag disagrees with its numbers is a transcription error.
	if it.Burstable != (it.PeakGbps > it.BaselineGbps) || it.PeakGbps < it.BaselineGbps {
		return it, fmt.Errorf("%s: baseline %v, peak %v and burstable=%v disagree",
			it.Name, it.BaselineGbps, it.PeakGbps, it.Burstable)
	}
	return it, nil
}

func parseGbps(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad Gbps value %q", s)
	}
	return v, nil
}

func normalizeName(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Clone returns an independent copy of t.
func (t *Table) Clone() *Table {
	c := &Table{types: make(map[string]InstanceType, len(t.types)), provenance: t.provenance}
	for k, v := range t.types {
		c.types[k] = v
	}
	c.overrides = append([]string(nil), t.overrides...)
	return c
}

// Lookup finds an instance type by name, ignoring case and surrounding space.
func (t *Table) Lookup(name string) (InstanceType, bool) {
	it, ok := t.types[normalizeName(name)]
	return it, ok
}

// Len is the number of instance types in t.
func (t *Table) Len() int { return len(t.types) }

// Names lists the instance types in t, sorted.
func (t *Table) Names() []string {
	names := make([]string, 0, len(t.types))
	for n := range t.types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Nearest lists the instance types of t a mistyped name was probably meant
// to be (c6i.xlargee: c6i.xlarge, ...), nearest first, at most three.
func (t *Table) Nearest(name string) []string {
	return suggest.Nearest(normalizeName(name), t.Names(), 2, 3)
}

// Override replaces the bandwidth of name, or adds name (with VCPUs unknown)
// if t lacks it. peakGbps 0 means no burst: the peak is the baseline. The
// override is recorded in Provenance so a report never passes a user's
// number off as AWS's.
func (t *Table) Override(name string, baselineGbps, peakGbps float64) error {
	name = normalizeName(name)
	if name == "" {
		return errors.New("override: empty instance type name")
	}
	if !(baselineGbps > 0) || math.IsInf(baselineGbps, 0) {
		return fmt.Errorf("override %s: baseline %v Gbps must be a positive number", name, baselineGbps)
	}
	if peakGbps == 0 {
		peakGbps = baselineGbps
	}
	if !(peakGbps >= baselineGbps) || math.IsInf(peakGbps, 0) {
		return fmt.Errorf("override %s: burst %v Gbps is below baseline %v Gbps", name, peakGbps, baselineGbps)
	}
	if t.types == nil {
		t.types = map[string]InstanceType{}
	}
	it := t.types[name]
	it.Name = name
	it.BaselineGbps, it.PeakGbps = baselineGbps, peakGbps
	it.Burstable = peakGbps > baselineGbps
	t.types[name] = it
	t.overrides = append(t.overrides, fmt.Sprintf("User override: %s baseline %s, peak %s.",
		name, units.BitRate(baselineGbps*1e9), units.BitRate(peakGbps*1e9)))
	return nil
}

// Provenance says where t's numbers come from, followed by one line per
// user override.
func (t *Table) Provenance() string {
	lines := t.overrides
	if t.provenance != "" {
		lines = append([]string{t.provenance}, lines...)
	}
	return strings.Join(lines, "\n")
}
