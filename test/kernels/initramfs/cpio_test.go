package initramfs

import (
	"bytes"
	"strconv"
	"testing"
)

type entry struct {
	name         string
	mode         uint32
	rdev         [2]uint32
	data         string
	headerOffset int
}

// readNewc reads an archive back by the format's rules: every header and
// every body starts at a multiple of 4.
func readNewc(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("header at %d field %d: %v", off, i, err)
		}
		return uint32(v)
	}
	for {
		if off%4 != 0 {
			t.Fatalf("header at %d: not 4-aligned", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("header at %d: magic %q", off, b[off:off+6])
		}
		e := entry{mode: field(1), rdev: [2]uint32{field(9), field(10)}, headerOffset: off}
		size, namesize := int(field(6)), int(field(11))
		name := b[off+110 : off+110+namesize]
		if name[namesize-1] != 0 {
			t.Fatalf("name at %d not NUL-terminated", off)
		}
		e.name = string(name[:namesize-1])
		body := (off + 110 + namesize + 3) &^ 3
		e.data = string(b[body : body+size])
		off = (body + size + 3) &^ 3
		if e.name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func TestWriterNewc(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.File("/kmatrix/bin/a.test", 0o755, []byte("12345"))
	w.File("kmatrix/plan.json", 0o644, []byte("{}"))
	w.Symlink("var/run", "/run")
	w.CharDev("dev/console", 5, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	want := []entry{
		{name: "kmatrix", mode: 0o040755},
		{name: "kmatrix/bin", mode: 0o040755},
		{name: "kmatrix/bin/a.test", mode: 0o100755, data: "12345"},
		{name: "kmatrix/plan.json", mode: 0o100644, data: "{}"},
		{name: "var", mode: 0o040755},
		{name: "var/run", mode: 0o120777, data: "/run"},
		{name: "dev", mode: 0o040755},
		{name: "dev/console", mode: 0o020600, rdev: [2]uint32{5, 1}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		g.headerOffset = 0
		if g != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, g, want[i])
		}
	}
}
