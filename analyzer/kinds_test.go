package analyzer

import (
	"slices"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/goconst"
)

// TestKindsListsEveryKind: Kinds holds every Kind constant of the package,
// so a kind added without its place in Kinds (and so without its metrics
// series) fails here.
func TestKindsListsEveryKind(t *testing.T) {
	consts := goconst.Strings(t, ".", "Kind")
	got := slices.Sorted(slices.Values(Kinds))
	if len(consts) < 10 || !slices.Equal(got, consts) {
		t.Errorf("Kinds %v\nKind constants %v", got, consts)
	}
}
