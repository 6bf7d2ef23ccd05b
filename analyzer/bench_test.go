package analyzer

import (
	"testing"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
)

// BenchmarkAnalyze analyses a 30 s recording at 100 µs buckets (300,000
// buckets per direction) with bursts, a DNS storm and SYN churn, its
// counters read every second and, as a trace reads them by default, every
// 10 ms (3,000 reads: the counter lag is estimated over each jump).
func BenchmarkAnalyze(b *testing.B) {
	for _, c := range []struct {
		name     string
		sampleNs int64
	}{{"reads-1s", 0}, {"reads-10ms", 10_000_000}} {
		b.Run(c.name, func(b *testing.B) {
			s := synth.Bench()
			s.SampleNs = c.sampleNs
			rec, _ := synth.Generate(s)
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
		})
	}
}
