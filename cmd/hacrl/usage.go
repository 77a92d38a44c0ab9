package main

import "fmt"

// usageErr is a usage error: a bad flag, flag value or argument count.
// hacrl prints it with a pointer to the command's help and exits with 2.
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// usage returns a usage error with a formatted message.
func usage(format string, args ...any) error { return usageErr{fmt.Sprintf(format, args...)} }
