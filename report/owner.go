package report

import (
	"fmt"
	"strings"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/record"
)

// ownerString names an owner for people, the process first and then the
// most telling place it runs in: `java[4121] pod payments/api-7d9 (veth)`.
// Empty for no owner.
func ownerString(o *record.Owner) string {
	if o == nil {
		return ""
	}
	var parts []string
	switch {
	case o.Comm != "" && o.PID != 0:
		parts = append(parts, fmt.Sprintf("%s[%d]", o.Comm, o.PID))
	case o.Comm != "":
		parts = append(parts, o.Comm)
	case o.PID != 0:
		parts = append(parts, fmt.Sprintf("pid %d", o.PID))
	}
	switch {
	case o.Pod != "":
		parts = append(parts, "pod "+o.Pod)
	case o.Container != "":
		parts = append(parts, "container "+shortID(o.Container))
	case o.Unit != "":
		parts = append(parts, o.Unit)
	case o.Cgroup != "":
		parts = append(parts, "cgroup "+o.Cgroup)
	}
	if o.How != "" && o.How != "socket" {
		parts = append(parts, "(by "+o.How+")")
	}
	return strings.Join(parts, " ")
}

// shortID shortens a container id as docker ps does.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ownersText ranks a finding's owners on one line.
func ownersText(owners []analyzer.OwnerShare) string {
	var parts []string
	for _, s := range owners {
		parts = append(parts, fmt.Sprintf("%s %s (%s flows)", ownerString(&s.Owner), fmtShare(s.Share), fmtCount(s.Flows)))
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
