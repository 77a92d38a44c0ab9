// Package deps pins modules that packages under construction will import, so
// that `go mod tidy` keeps them in go.mod. Remove an import here once a real
// package imports the module.
package deps

import (
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/spf13/cobra"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/term"
	_ "gonum.org/v1/plot"
	_ "gonum.org/v1/plot/vg/vgimg"
	_ "google.golang.org/protobuf/encoding/protowire"
)
