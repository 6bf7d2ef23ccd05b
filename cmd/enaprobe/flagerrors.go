package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/internal/suggest"
)

// explainFlagError turns pflag's errors into ones that say the fix: an
// unknown flag with the flags it was probably meant to be (cobra does this
// for commands, not flags), a duration without a unit with one.
func explainFlagError(cmd *cobra.Command, err error) error {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() == "":
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		near := suggest.Nearest(notExist.GetSpecifiedName(), names, 2, 3)
		if len(near) == 0 {
			return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
		}
		for i := range near {
			near[i] = "--" + near[i]
		}
		return fmt.Errorf("%w: did you mean %s? (see %s --help)", err, strings.Join(near, " or "), cmd.CommandPath())
	case errors.As(err, &invalid) && invalid.GetFlag().Value.Type() == "duration" && isBareNumber(invalid.GetValue()):
		f := invalid.GetFlag()
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		v := invalid.GetValue()
		return fmt.Errorf("%s %s has no unit: write it with one, e.g. %ss, %sms or %sm", name, v, v, v, v)
	}
	return err
}

// isBareNumber tells whether s is a number with no unit after it.
func isBareNumber(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && strings.TrimLeft(s, "0123456789.") == ""
}
