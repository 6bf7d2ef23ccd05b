// Package suggest finds the words a mistyped one was probably meant to be:
// a flag name, an instance type.
package suggest

import (
	"slices"
	"strings"
)

// Nearest returns the candidates within maxDistance edits of word (case
// insensitive), nearest first and then in alphabetical order, at most n of
// them. A candidate that word is a prefix of counts as one edit away, so
// "--dur" still finds "--duration".
func Nearest(word string, candidates []string, maxDistance, n int) []string {
	type scored struct {
		name string
		d    int
	}
	w := strings.ToLower(word)
	var found []scored
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := Distance(w, lc)
		if w != "" && strings.HasPrefix(lc, w) && d > 1 {
			d = 1
		}
		if d <= maxDistance && lc != w {
			found = append(found, scored{c, d})
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for i := 0; i < len(found) && i < n; i++ {
		out = append(out, found[i].name)
	}
	return out
}

// Distance is the Levenshtein distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
