package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/kernel"
)

// versionText is what hacrl --version prints: the module version and the
// commit the toolchain stamped (with "+dirty" for a modified tree), the Go
// version and platform, whether the XLA backend is built in (-tags xla),
// and the kernels the native engine runs on this CPU.
func versionText() string {
	version, rev, dirty := buildStamp()
	if version == "" {
		version = "(devel)"
	}
	commit := "unknown commit"
	if rev != "" {
		commit = "commit " + rev
		if dirty {
			commit += "+dirty"
		}
	}
	xla := "without XLA (build with -tags xla for GPUs)"
	if backend.XLA {
		xla = "with XLA"
	}
	return fmt.Sprintf("hacrl %s (%s) %s %s/%s, %s, native kernels %s\n",
		version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, xla, kernel.Path())
}

// buildStamp is what the toolchain stamped into this executable: the main
// module's version, the VCS revision and whether the tree was modified (""
// and false where it stamped nothing, as go run and -buildvcs=false).
func buildStamp() (version, rev string, dirty bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", false
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return bi.Main.Version, rev, dirty
}

// versionTemplate makes cobra's --version print versionText as it is.
func versionTemplate(text string) string {
	return strings.ReplaceAll(text, "{{", "{{`{{`}}")
}
