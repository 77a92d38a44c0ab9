//go:build xla

package backend

import _ "github.com/gomlx/go-xla/compute/xla" // registers "xla"; needs cgo and a PJRT plugin at run time

const xlaCompiled = true
