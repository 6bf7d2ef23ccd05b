package main

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/loader"
)

func newCleanupCommand() *cobra.Command {
	var ifaces []string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the tc filters and clsact qdisc that killed enaprobe runs left on interfaces",
		Long: `cleanup lists the legacy tc filters of enaprobe (named enaprobe-PID-...) on
each interface and removes those whose process no longer runs (a trace killed
with SIGKILL), with the clsact qdisc such a run added once nothing else uses it.
Filters of running traces, and everything that is not enaprobe's, stay.
Every trace does the same on the interfaces it traces. tcx attachments end
with their process and never need cleaning.`,
		Example: `  sudo enaprobe cleanup            # every interface
  sudo enaprobe cleanup -i ens5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Geteuid() != 0 {
				return privilegeError{errors.New("cleanup needs root (CAP_NET_ADMIN): run it with sudo")}
			}
			names := ifaces
			if len(names) == 0 {
				all, err := net.Interfaces()
				if err != nil {
					return fmt.Errorf("list interfaces: %w", err)
				}
				for _, i := range all {
					names = append(names, i.Name)
				}
			} else {
				for _, n := range names {
					if _, err := net.InterfaceByName(n); err != nil {
						return usagef("interface %s: %v (list them with `ip link`)", n, err)
					}
				}
			}
			w := cmd.OutOrStdout()
			found := 0
			for _, n := range names {
				c, err := loader.RemoveOrphans(n)
				if err != nil {
					return err
				}
				for _, f := range c.Filters {
					found++
					state := "running: kept"
					if f.Removed {
						state = "not running: removed"
					}
					fmt.Fprintf(w, "%s\ttc %s filter %s\tPID %d %s\n", n, f.Hook, f.Name, f.PID, state)
				}
				if c.QdiscRemoved {
					fmt.Fprintf(w, "%s\tclsact qdisc added by enaprobe\tremoved\n", n)
				}
			}
			if found == 0 {
				fmt.Fprintln(w, "no tc filter of enaprobe found")
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&ifaces, "interface", "i", nil, "interface to clean, repeatable (default: every interface)")
	return cmd
}
