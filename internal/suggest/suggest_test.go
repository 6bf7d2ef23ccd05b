package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"duraton", "duration", 1}, {"kitten", "sitting", 3}, {"c6i.xlargee", "c6i.xlarge", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	flags := []string{"duration", "output", "format", "interface", "bucket"}
	if got := Nearest("duraton", flags, 2, 3); !slices.Equal(got, []string{"duration"}) {
		t.Errorf("duraton: %v", got)
	}
	if got := Nearest("dur", flags, 2, 3); !slices.Equal(got, []string{"duration"}) {
		t.Errorf("dur: %v", got)
	}
	if got := Nearest("zzzzzz", flags, 2, 3); len(got) != 0 {
		t.Errorf("zzzzzz: %v", got)
	}
	types := []string{"c6i.xlarge", "c6i.2xlarge", "c6in.xlarge", "m5.large"}
	if got := Nearest("c6i.xlargee", types, 2, 3); !slices.Equal(got, []string{"c6i.xlarge", "c6i.2xlarge", "c6in.xlarge"}) {
		t.Errorf("c6i.xlargee: %v", got)
	}
}
