package report

import (
	"strings"
	"unicode/utf8"
)

// textWidth is the widest line of the text report.
const textWidth = 100

// page collects the lines of the text report.
type page struct{ b strings.Builder }

func (p *page) line(parts ...string) {
	p.b.WriteString(strings.TrimRight(strings.Join(parts, ""), " "))
	p.b.WriteByte('\n')
}

func (p *page) blank() { p.b.WriteByte('\n') }

// heading writes a section title underlined to its length.
func (p *page) heading(title string) {
	p.blank()
	p.line(title)
	p.line(strings.Repeat("=", utf8.RuneCountInString(title)))
}

func (p *page) subheading(title string) {
	p.blank()
	p.line(title)
}

// field writes "label   value" with the value wrapped under itself.
func (p *page) field(indent, label string, labelWidth int, value string) {
	pad := indent + strings.Repeat(" ", labelWidth)
	lines := wrap(value, textWidth-utf8.RuneCountInString(pad))
	if len(lines) == 0 {
		lines = []string{""}
	}
	first := indent + label + strings.Repeat(" ", max(labelWidth-utf8.RuneCountInString(label), 1))
	for i, l := range lines {
		if i == 0 {
			p.line(first, l)
		} else {
			p.line(pad, l)
		}
	}
}

// para writes wrapped prose.
func (p *page) para(indent, s string) {
	for _, l := range wrap(s, textWidth-utf8.RuneCountInString(indent)) {
		p.line(indent, l)
	}
}

func (p *page) lines(ls []string) {
	for _, l := range ls {
		p.line(l)
	}
}

// wrap breaks s at spaces into lines of at most width runes; a word longer
// than width gets a line of its own. A number and its unit ("100 ms",
// "2.44 Gbit/s") stay on one line.
func wrap(s string, width int) []string {
	var out []string
	var cur strings.Builder
	n := 0
	for _, w := range quantityWords(strings.Fields(s)) {
		wn := utf8.RuneCountInString(w)
		if n > 0 && n+1+wn > width {
			out = append(out, cur.String())
			cur.Reset()
			n = 0
		}
		if n > 0 {
			cur.WriteByte(' ')
			n++
		}
		cur.WriteString(w)
		n += wn
	}
	if n > 0 {
		out = append(out, cur.String())
	}
	return out
}

// quantityWords joins each unit to the number before it, so wrapping never
// puts "+0.933" at the end of one line and "s" at the start of the next.
func quantityWords(words []string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		if n := len(out); n > 0 && isUnit(strings.TrimRight(w, ",;:.)]")) && endsInDigit(out[n-1]) {
			out[n-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}

func endsInDigit(w string) bool {
	return w != "" && w[len(w)-1] >= '0' && w[len(w)-1] <= '9'
}

// isUnit tells whether w is a unit package units writes after a number.
func isUnit(w string) bool {
	for _, p := range []string{"", "k", "M", "G", "T"} {
		switch strings.TrimPrefix(w, p) {
		case "bit/s", "pps", "B", "SYN/s", "/s":
			return true
		}
	}
	switch w {
	case "s", "ms", "µs", "min":
		return true
	}
	return false
}

// table is rows of cells aligned in columns: text left, numbers right. The
// standard text/tabwriter aligns every column the same way, and a column
// of numbers reads best aligned on its last digit.
type table struct {
	right []bool // per column: align right
	rows  [][]string
}

func newTable(header ...string) *table {
	return &table{right: make([]bool, len(header)), rows: [][]string{header}}
}

// rightAlign marks columns (by index) as numeric.
func (t *table) rightAlign(cols ...int) *table {
	for _, c := range cols {
		t.right[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// render lays the table out with two spaces between columns.
func (t *table) render(indent string) []string {
	widths := make([]int, len(t.right))
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var out []string
	for _, r := range t.rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if t.right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

// renderFitting renders the table; when a line would be wider than the
// page (long IPv6 flows), the first column goes on a line of its own above
// the rest of its row, wrapped if it alone is too wide.
func (t *table) renderFitting(indent string) []string {
	out := t.render(indent)
	if maxWidth(out) <= textWidth {
		return out
	}
	rest := &table{right: t.right[1:]}
	for _, r := range t.rows {
		rest.rows = append(rest.rows, r[1:])
	}
	restLines := rest.render(indent + "    ")
	out = out[:0]
	for i, r := range t.rows {
		for j, l := range wrap(r[0], textWidth-utf8.RuneCountInString(indent)-2) {
			if j > 0 {
				l = "  " + l
			}
			out = append(out, indent+l)
		}
		out = append(out, restLines[i])
	}
	return out
}

func maxWidth(lines []string) int {
	w := 0
	for _, l := range lines {
		w = max(w, utf8.RuneCountInString(l))
	}
	return w
}
