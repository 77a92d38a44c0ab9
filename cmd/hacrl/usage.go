package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// usageErr is a mistake in how a command was called (a flag's value, the
// arguments), as opposed to a failure of the work: the command reports it
// and exits with status 2.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// usage returns a usageErr with a formatted message.
func usage(format string, args ...any) error { return usageErr{fmt.Sprintf(format, args...)} }

// usageExit makes a usageErr from cmd's flags, arguments or RunE end the
// program with exit status 2: the message goes to standard error and the
// error returned is exitCode(2). Other errors pass through unchanged.
func usageExit(cmd *cobra.Command) *cobra.Command {
	report := func(c *cobra.Command, err error) error {
		var ue usageErr
		if !errors.As(err, &ue) {
			return err
		}
		fmt.Fprintf(c.ErrOrStderr(), "hacrl %s: %s (see hacrl %s --help)\n", c.Name(), ue.msg, c.Name())
		return exitCode(2)
	}
	args, run := cmd.Args, cmd.RunE
	cmd.Args = func(c *cobra.Command, a []string) error {
		if args == nil {
			return nil
		}
		if err := args(c, a); err != nil {
			return report(c, usage("%v", err))
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, a []string) error { return report(c, run(c, a)) }
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return report(c, usage("%v", err)) })
	return cmd
}
