//go:build !xla

package backend

import "github.com/gomlx/compute"

// XLA reports whether this binary has the XLA backend (built with -tags xla).
const XLA = false

func newXLA(xlaSpec) (compute.Backend, error) { return nil, errNoXLA }

func checkXLA(xlaSpec) error { return errNoXLA }
