package analyzer

import (
	"testing"

	"github.com/enaprobe/enaprobe/analyzer/internal/scenario"
)

// BenchmarkAnalyze analyses a 30 s recording at 100 µs buckets (300,000
// buckets per direction) with bursts, a DNS storm and SYN churn.
func BenchmarkAnalyze(b *testing.B) {
	rec, _ := scenario.Generate(scenario.Bench())
	rec = roundTrip(b, rec)
	var buckets int
	for _, s := range rec.Series {
		buckets += len(s.Buckets)
	}
	b.ReportMetric(float64(buckets), "buckets")
	b.ResetTimer()
	for b.Loop() {
		res := Analyze(rec, DefaultOptions())
		if len(res.Findings) == 0 {
			b.Fatal("no finding in the benchmark recording")
		}
	}
}
