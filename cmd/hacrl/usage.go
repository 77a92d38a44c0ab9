package main

import "fmt"

// usageErr is a mistake in how a command was called (a flag's value, the
// arguments), as opposed to a failure of the work: the command reports it
// and exits with status 2.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// usage returns a usageErr with a formatted message.
func usage(format string, args ...any) error { return usageErr{fmt.Sprintf(format, args...)} }
