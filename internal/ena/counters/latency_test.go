package counters

import (
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
)

func read(beforeNs, afterNs int64) record.CounterSample {
	return record.CounterSample{Interface: "eth0", BeforeNs: beforeNs, AfterNs: afterNs}
}

func TestLatency(t *testing.T) {
	tests := []struct {
		name    string
		samples []record.CounterSample
		want    ReadLatency
	}{
		{name: "none", want: ReadLatency{}},
		{name: "one", samples: []record.CounterSample{read(10, 40)}, want: ReadLatency{Reads: 1, Min: 30, Median: 30, Max: 30}},
		{
			name:    "odd",
			samples: []record.CounterSample{read(0, 500), read(1000, 1100), read(2000, 2300)},
			want:    ReadLatency{Reads: 3, Min: 100, Median: 300, Max: 500},
		},
		{
			name:    "even, failed read included",
			samples: []record.CounterSample{read(0, 100), read(1000, 1200), {BeforeNs: 2000, AfterNs: 2000 + int64(time.Millisecond), Err: "timeout"}, read(3000, 3400)},
			want:    ReadLatency{Reads: 4, Min: 100, Median: 300, Max: time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Latency(tt.samples); got != tt.want {
				t.Errorf("Latency = %+v, want %+v", got, tt.want)
			}
		})
	}
}
