package analyzer

import (
	"fmt"
	"os"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

// Debug only; never committed.
func TestZZRec(t *testing.T) {
	path := os.Getenv("ZZREC")
	if path == "" {
		t.Skip()
	}
	rec, err := record.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := RecordedOptions(rec)
	if os.Getenv("ZZUNKNOWN") != "" {
		opt.BaselineBps, opt.BurstBps, opt.PPSAllowance = 0, 0, 0
	}
	res := Analyze(rec, opt)
	start := rec.Meta.Start
	fmt.Println("start", start)
	for _, f := range res.Findings {
		fmt.Printf("%s %s [%.4f %.4f] %s\n", f.Severity, f.Kind, f.StartOffsetS, f.EndOffsetS, f.Summary)
		if len(f.Flows) > 0 {
			fmt.Printf("   first %s\n", f.Flows[0].Src)
		}
		if inc := f.Incident; inc != nil {
			fmt.Printf("   lag %.4f (%.4f-%.4f) %s refresh %.4f known=%v look %.3f\n", inc.CounterLagS, inc.CounterLagLowS, inc.CounterLagHighS, inc.CounterLagSource, inc.CounterRefreshS, inc.CounterRefreshKnown, inc.LookBackS)
		}
	}
}
