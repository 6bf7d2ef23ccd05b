package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/deploy/seccomp"
)

// newSeccompCommand prints or writes the container's seccomp profile: the
// DaemonSet's init container writes it where the kubelet reads Localhost
// profiles, since the runtimes' default profile refuses bpf(2) without
// CAP_SYS_ADMIN. Hidden: a deployment step, not a user's command.
func newSeccompCommand() *cobra.Command {
	var write string
	cmd := &cobra.Command{
		Use:    "seccomp-profile",
		Short:  "Print the seccomp profile enaprobe's container needs (deploy/seccomp/enaprobe.json), or --write it",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if write == "" {
				_, err := cmd.OutOrStdout().Write(seccomp.Profile)
				return err
			}
			// Beside it, then renamed: the kubelet never reads half a profile.
			tmp := filepath.Join(filepath.Dir(write), "."+filepath.Base(write)+".tmp")
			if err := os.WriteFile(tmp, seccomp.Profile, 0o644); err != nil {
				return fmt.Errorf("write the seccomp profile: %w", err)
			}
			if err := os.Rename(tmp, write); err != nil {
				return fmt.Errorf("write the seccomp profile: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&write, "write", "", "write the profile to this file (its directory must exist), e.g. /host/seccomp/profiles/enaprobe.json")
	return cmd
}
