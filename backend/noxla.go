//go:build !xla

package backend

const xlaCompiled = false
