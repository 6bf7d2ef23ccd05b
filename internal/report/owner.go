package report

import (
	"fmt"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/units"
)

// ownerString names an owner for people (record.Owner.String); empty for
// none.
func ownerString(o *record.Owner) string {
	if o == nil {
		return ""
	}
	return o.String()
}

// ownersText ranks a finding's owners on one line.
func ownersText(owners []analyzer.OwnerShare) string {
	var parts []string
	for _, s := range owners {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", ownerString(&s.Owner), fmtShare(s.Share), units.Counted(s.Flows, "flow")))
	}
	return strings.Join(parts, "; ")
}

func anyFlowOwner(flows []analyzer.FlowShare) bool {
	for _, f := range flows {
		if f.Owner != nil {
			return true
		}
	}
	return false
}
