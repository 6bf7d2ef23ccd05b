package lab

import (
	"errors"
	"os"
	"sort"
	"strings"

	"github.com/enaprobe/enaprobe/internal/namedns"
)

// namespacePrefix starts the name of every namespace of the lab with this
// id: its instance, VPC and containers.
func namespacePrefix(id string) string { return "enalab-" + id + "-" }

// RemoveNamespaces removes the namespaces a lab with this id left behind
// when its process was killed before Close: their nftables rulesets are
// flushed and their names unmounted, and with no process left inside they
// go with their links. It returns the names removed; none is not an error,
// so it is safe to run twice. Only for a lab whose process is gone: a
// running lab's namespaces are its own to close.
func RemoveNamespaces(id string) ([]string, error) {
	if id == "" || strings.ContainsAny(id, "/-") {
		return nil, errors.New("lab id: want the hex id a lab printed")
	}
	entries, err := os.ReadDir(namedns.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), namespacePrefix(id)) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var errs []error
	var removed []string
	for _, name := range names {
		ns, err := namedns.Open(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := ns.Run(nil, "nft", "flush", "ruleset"); err != nil {
			errs = append(errs, err)
		}
		if err := ns.Close(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
