// Command gendoc writes the config reference, docs/config.md, from the
// config package (see package refdoc). Run it with `go generate ./config`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hacrl/hacrl/config/internal/refdoc"
)

func main() {
	dir := flag.String("dir", ".", "directory of the config package's sources")
	out := flag.String("out", "../docs/config.md", "file to write")
	flag.Parse()
	if err := refdoc.Write(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
