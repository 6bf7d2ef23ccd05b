package flightrec

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// BundlePrefix starts the name of every bundle serve writes; Prune only
// ever removes files named so.
const BundlePrefix = "enaprobe-"

// BundleSuffix ends it.
const BundleSuffix = ".tar.gz"

// Prune removes the oldest bundles of dir (by name: their names start with
// the UTC time) until at most maxBundles remain and they take at most
// maxBytes; 0 is no limit. The newest bundle is never removed, so the last
// incident's evidence stays whatever the budget, and neither is a bundle
// keep holds (nil: none), such as one waiting for its upload: it counts
// toward the budget, and older ones go first. It returns the removed paths
// and the bytes the rest take.
func Prune(dir string, maxBundles int, maxBytes int64, keep func(path string) bool) (removed []string, kept int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	type bundle struct {
		path string
		size int64
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
		bundles = append(bundles, bundle{filepath.Join(dir, name), info.Size()})
		total += info.Size()
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].path < bundles[j].path })
	over := func() bool {
		return maxBundles > 0 && len(bundles) > maxBundles || maxBytes > 0 && total > maxBytes
	}
	for i := 0; i < len(bundles)-1 && over(); {
		b := bundles[i]
		if keep != nil && keep(b.path) {
			i++
			continue
		}
		if err := os.Remove(b.path); err != nil && !os.IsNotExist(err) {
			return removed, total, err
		}
		removed = append(removed, b.path)
		total -= b.size
		bundles = slices.Delete(bundles, i, i+1)
	}
	return removed, total, nil
}
