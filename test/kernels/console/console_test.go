package console

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	log := strings.Join([]string{
		"KMATRIX kernel 6.1.0-57-cloud-amd64 x86_64",
		CheckLine("boot", Pass, ""),
		"=== RUN   TestVerifierStats",
		"    verifier_test.go:46: " + VerifierLine(Verifier{Program: "enaprobe_ingress", Insns: 1000001, Result: "rejected"}) + "\r",
		"    verifier_test.go:44: verifier: program=enaprobe_egress insns=-1 result=rejected states=0",
		"    verifier_test.go:44: verifier (shared buckets): program=enaprobe_egress insns=5 result=loaded",
		"--- FAIL: TestVerifierStats (123.75s)",
		"    --- FAIL: TestVerifierStats/sub (1.00s)",
		"--- PASS: TestDatapathGSO (0.50s)",
		"--- SKIP: TestX (0.00s)",
		CheckLine("trace", Fail, "the sink got 3\nof 4"),
		"[   12.3] random kernel line",
		DoneLine(),
	}, "\n")
	rep, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"boot": Pass, "TestVerifierStats": Fail, "TestDatapathGSO": Pass, "TestX": Skip, "trace": Fail}
	if len(rep.Checks) != len(want) {
		t.Errorf("checks %v, want %v", rep.Checks, want)
	}
	for k, v := range want {
		if rep.Checks[k] != v {
			t.Errorf("check %s: %q, want %q", k, rep.Checks[k], v)
		}
	}
	if rep.Details["trace"] != "the sink got 3 | of 4" {
		t.Errorf("trace detail %q", rep.Details["trace"])
	}
	if len(rep.Verifier) != 2 || rep.Verifier[0] != (Verifier{"enaprobe_ingress", 1000001, "rejected"}) ||
		rep.Verifier[1] != (Verifier{"enaprobe_egress", -1, "rejected"}) {
		t.Errorf("verifier %+v", rep.Verifier)
	}
	if !rep.Done {
		t.Error("done line not seen")
	}
}
