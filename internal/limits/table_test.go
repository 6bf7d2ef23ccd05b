package limits

import (
	"strings"
	"testing"
)

// Anchors from AWS-LIMITS.md; the table must agree with them.
func TestLookupAnchors(t *testing.T) {
	tests := []struct {
		name      string
		base      float64
		peak      float64
		burstable bool
	}{
		{"c5.large", 0.75, 10, true},
		{"m5.large", 0.75, 10, true},
		{"t3.micro", 0.064, 5, true},
		{"c6i.large", 0.781, 12.5, true},
		{"c7g.large", 0.937, 12.5, true},
		{"m7i.large", 0.781, 12.5, true},
		{"m5.8xlarge", 10, 10, false},
		{"c5.24xlarge", 25, 25, false},
	}
	for _, tc := range tests {
		it, ok := Lookup(tc.name)
		if !ok {
			t.Errorf("Lookup(%q): not found", tc.name)
			continue
		}
		if it.Name != tc.name || it.BaselineGbps != tc.base || it.PeakGbps != tc.peak || it.Burstable != tc.burstable {
			t.Errorf("Lookup(%q) = %+v, want baseline %v peak %v burstable %v",
				tc.name, it, tc.base, tc.peak, tc.burstable)
		}
	}
}

func TestLookupVCPUsAndNames(t *testing.T) {
	for name, want := range map[string]int{"t3.micro": 2, "m5.8xlarge": 32, "c7gn.metal": 64, "x2idn.metal": 128, "m8g.metal-48xl": 192} {
		if it, ok := Lookup(name); !ok || it.VCPUs != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %d vCPUs", name, it, ok, want)
		}
	}
	if it, ok := Lookup("  C5.Large "); !ok || it.Name != "c5.large" {
		t.Errorf("Lookup ignores case and space: got %+v, %v", it, ok)
	}
	if _, ok := Lookup("c5.huge"); ok {
		t.Error("Lookup(c5.huge) found something")
	}
}

// The families the table promises to cover, and the invariants every row keeps.
func TestEmbeddedTableCoverage(t *testing.T) {
	tab := Default()
	families := map[string]int{}
	for _, n := range tab.Names() {
		it, _ := tab.Lookup(n)
		families[strings.SplitN(n, ".", 2)[0]]++
		if it.VCPUs <= 0 || it.BaselineGbps <= 0 || it.PeakGbps < it.BaselineGbps || it.Burstable != (it.PeakGbps > it.BaselineGbps) {
			t.Errorf("bad row %+v", it)
		}
	}
	for _, f := range strings.Fields(`m5 m5n m6i m6a m6g m7i m7a m7g m8g t3 t3a t4g
		c5 c5n c6i c6a c6g c6gn c7i c7a c7g c7gn c8g
		r5 r5n r6i r6a r6g r7i r7a r7g r8g x2idn`) {
		if families[f] == 0 {
			t.Errorf("family %s missing", f)
		}
	}
	if tab.Len() < 300 {
		t.Errorf("table has %d types, want the 316 transcribed", tab.Len())
	}
}

func TestProvenance(t *testing.T) {
	p := Provenance()
	for _, want := range []string{"docs.aws.amazon.com/ec2/latest/instancetypes", "2026-11-30", "BaselineBandwidthInGbps"} {
		if !strings.Contains(p, want) {
			t.Errorf("Provenance() lacks %q:\n%s", want, p)
		}
	}
}

func TestOverride(t *testing.T) {
	tab := Default()
	if err := tab.Override("C5.large", 0.5, 0); err != nil {
		t.Fatal(err)
	}
	it, _ := tab.Lookup("c5.large")
	if it.BaselineGbps != 0.5 || it.PeakGbps != 0.5 || it.Burstable || it.VCPUs != 2 {
		t.Errorf("after override: %+v", it)
	}
	if err := tab.Override("z9.custom", 1, 4); err != nil {
		t.Fatal(err)
	}
	it, ok := tab.Lookup("z9.custom")
	if !ok || it.BaselineGbps != 1 || it.PeakGbps != 4 || !it.Burstable || it.VCPUs != 0 {
		t.Errorf("added type: %+v, %v", it, ok)
	}
	if !strings.Contains(tab.Provenance(), "User override: c5.large baseline 500 Mbit/s, peak 500 Mbit/s.") {
		t.Errorf("provenance does not record the override:\n%s", tab.Provenance())
	}
	// The shared table and other copies are untouched.
	if it, _ := Lookup("c5.large"); it.BaselineGbps != 0.75 {
		t.Errorf("override leaked into the embedded table: %+v", it)
	}
	if strings.Contains(Provenance(), "User override") {
		t.Error("override leaked into the embedded provenance")
	}

	for _, bad := range []struct {
		name       string
		base, peak float64
	}{{"", 1, 1}, {"x.y", 0, 1}, {"x.y", -1, 1}, {"x.y", 2, 1}} {
		if err := tab.Override(bad.name, bad.base, bad.peak); err == nil {
			t.Errorf("Override(%q, %v, %v) accepted", bad.name, bad.base, bad.peak)
		}
	}

	var zero Table
	if err := zero.Override("a.b", 1, 2); err != nil {
		t.Fatal(err)
	}
	if zero.Len() != 1 || zero.Provenance() != "User override: a.b baseline 1 Gbit/s, peak 2 Gbit/s." {
		t.Errorf("zero Table after override: len %d, provenance %q", zero.Len(), zero.Provenance())
	}
}

func TestParseTableErrors(t *testing.T) {
	const header = "name,vcpus,baseline_gbps,peak_gbps,burstable\n"
	for name, in := range map[string]string{
		"no header":       "# only comments\n",
		"wrong header":    "type,vcpus,base,peak,burst\n",
		"short row":       header + "a.b,2,1,1\n",
		"bad vcpus":       header + "a.b,two,1,1,false\n",
		"bad baseline":    header + "a.b,2,fast,1,false\n",
		"zero baseline":   header + "a.b,2,0,1,true\n",
		"peak below":      header + "a.b,2,2,1,false\n",
		"flag disagrees":  header + "a.b,2,1,5,false\n",
		"flag disagrees2": header + "a.b,2,1,1,true\n",
		"bad flag":        header + "a.b,2,1,1,maybe\n",
		"duplicate":       header + "a.b,2,1,1,false\nA.B,2,1,1,false\n",
	} {
		if _, err := ParseTable(strings.NewReader(in)); err == nil {
			t.Errorf("%s: ParseTable accepted %q", name, in)
		}
	}
	tab, err := ParseTable(strings.NewReader("# where\n# when\n" + header + "a.b,2,1,5,true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Provenance() != "where\nwhen" || tab.Len() != 1 {
		t.Errorf("provenance %q, len %d", tab.Provenance(), tab.Len())
	}
}
