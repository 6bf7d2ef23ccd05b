package counters

import "github.com/enaprobe/enaprobe/internal/record"

// Absent returns the names of want that no successful read of samples holds,
// in the order of want. An older ENA driver lacks the newer counters, and a
// device without ENA Express lacks the SRD ones: such counters are absent,
// which a report must not show as zero. With no successful read at all every
// name is absent.
func Absent(samples []record.CounterSample, want []string) []string {
	seen := make(map[string]bool, len(want))
	for _, s := range samples {
		if s.Err != "" {
			continue
		}
		for _, name := range want {
			if _, ok := s.Values[name]; ok {
				seen[name] = true
			}
		}
	}
	var absent []string
	for _, name := range want {
		if !seen[name] {
			absent = append(absent, name)
		}
	}
	return absent
}

// ByInterface splits samples by interface, keeping their order.
func ByInterface(samples []record.CounterSample) map[string][]record.CounterSample {
	out := make(map[string][]record.CounterSample)
	for _, s := range samples {
		out[s.Interface] = append(out[s.Interface], s)
	}
	return out
}
