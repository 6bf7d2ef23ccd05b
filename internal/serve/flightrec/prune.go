package flightrec

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// BundlePrefix starts the name of every bundle serve writes; Prune only
// ever removes files named so.
const BundlePrefix = "enaprobe-"

// BundleSuffix ends it.
const BundleSuffix = ".tar.gz"

// Budget bounds the bundles of a directory; 0 is no bound.
type Budget struct {
	MaxBundles int
	MaxBytes   int64
	// Pending, when set, names bundles that stay whatever the bounds (one
	// waiting for its upload: the only copy); they count toward them.
	Pending func(path string) bool
}

func (b Budget) over(n int, bytes int64) bool {
	return b.MaxBundles > 0 && n > b.MaxBundles || b.MaxBytes > 0 && bytes > b.MaxBytes
}

// Prune removes bundles of dir until at most MaxBundles remain and they
// take at most MaxBytes, the oldest first (by name: their names start with
// the UTC time). Snapshots (the bundles isSnapshot says, by base name) go
// before any incident bundle, and incident bundles go only to make room
// for an incident's: after a snapshot (forSnapshot) only snapshots go, the
// new one too when the incident bundles alone fill the budget, so no
// number of snapshots ever pushes an incident's evidence out. After an
// incident the newest bundle never goes, whatever the budget; nor does a
// pending one (Budget.Pending). It returns the removed paths and the bytes
// the rest take.
func Prune(dir string, b Budget, isSnapshot func(name string) bool, forSnapshot bool) (removed []string, kept int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	type bundle struct {
		path     string
		size     int64
		snapshot bool
	}
	var bundles []bundle
	var total int64
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, BundlePrefix) || !strings.HasSuffix(name, BundleSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		bundles = append(bundles, bundle{filepath.Join(dir, name), info.Size(), isSnapshot(name)})
		total += info.Size()
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].path < bundles[j].path })
	// The order they may go in: snapshots, then (after an incident)
	// incident bundles but the newest bundle.
	var order []bundle
	for _, v := range bundles {
		if v.snapshot && (forSnapshot || v != bundles[len(bundles)-1]) {
			order = append(order, v)
		}
	}
	if !forSnapshot {
		for _, v := range bundles[:max(len(bundles)-1, 0)] {
			if !v.snapshot {
				order = append(order, v)
			}
		}
	}
	n := len(bundles)
	for _, v := range order {
		if !b.over(n, total) {
			break
		}
		if b.Pending != nil && b.Pending(v.path) {
			continue
		}
		if err := os.Remove(v.path); err != nil && !os.IsNotExist(err) {
			return removed, total, err
		}
		removed = append(removed, v.path)
		total -= v.size
		n--
	}
	return removed, total, nil
}
