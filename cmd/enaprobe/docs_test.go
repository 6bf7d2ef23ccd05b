package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/enaprobe/enaprobe/internal/testutil/goconst"
)

// markdownLink matches [text](target) and ![alt](target); the target ends
// at a space (a title) or the closing parenthesis.
var markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)[^)]*\)`)

// TestDocLinks: every relative link of README.md and docs/*.md leads to a
// file of the tree, and to a heading of it when it names one, and every
// page of docs/ is linked from the README, so whatever moved out of the
// README can be reached from it.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	fromREADME := map[string]bool{}
	for _, page := range pages {
		text := readDoc(t, page)
		for _, target := range docLinks(text) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Clean(filepath.Join(filepath.Dir(page), file))
			if file == "" {
				path = page
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", rel(page), target, err)
				continue
			}
			if filepath.Base(page) == "README.md" {
				fromREADME[filepath.Clean(path)] = true
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(headingAnchors(readDoc(t, path)), anchor) {
				t.Errorf("%s: link %s: %s has no heading #%s", rel(page), target, rel(path), anchor)
			}
		}
	}
	for _, page := range pages[:len(pages)-1] {
		if !fromREADME[filepath.Clean(page)] {
			t.Errorf("%s is not linked from README.md", rel(page))
		}
	}
}

// TestFindingKindsDocumented: docs/findings.md has a row for every finding
// kind the analyzer declares (its Kind* constants), so a kind added without
// its evidence and fix fails here.
func TestFindingKindsDocumented(t *testing.T) {
	findings := readDoc(t, "../../docs/findings.md")
	kinds := goconst.Strings(t, "../../analyzer", "Kind")
	for _, kind := range kinds {
		if !strings.Contains(findings, "| `"+kind+"`") && !strings.Contains(findings, ", `"+kind+"` |") {
			t.Errorf("finding kind %s (an analyzer Kind constant) has no row in docs/findings.md", kind)
		}
	}
	if len(kinds) < 10 {
		t.Errorf("found %d finding kinds in analyzer/, want the Kind* constants", len(kinds))
	}
}

// TestDocLinksFindsBroken: the link and anchor rules of TestDocLinks see
// what they must.
func TestDocLinksFindsBroken(t *testing.T) {
	text := "# A `b` c\n\n[x](y.md#a-b-c) ![i](docs/p.png \"title\")\n\n```\n[not](a-link.md)\n```\n## Costs: per packet (ratio)\n"
	if got, want := docLinks(text), []string{"y.md#a-b-c", "docs/p.png"}; !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
	if got, want := headingAnchors(text), []string{"a-b-c", "costs-per-packet-ratio"}; !slices.Equal(got, want) {
		t.Errorf("anchors %q, want %q", got, want)
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rel(path string) string { return strings.TrimPrefix(filepath.Clean(path), "../../") }

// docLinks returns the link targets outside fenced code blocks.
func docLinks(text string) []string {
	var targets []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// headingAnchors returns the anchors GitHub gives the headings: lower case,
// spaces to hyphens, punctuation but hyphens and underscores dropped, a
// repeated heading numbered.
func headingAnchors(text string) []string {
	var anchors []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			anchor += "-" + strconv.Itoa(n)
		}
		seen[b.String()]++
		anchors = append(anchors, anchor)
	}
	return anchors
}
