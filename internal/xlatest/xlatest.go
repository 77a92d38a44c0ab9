//go:build xla

// Package xlatest gives tests built with -tags xla the XLA backend on the
// CPU ("xla:cpu"): XLA's own compiler and runtime, the code path hacrl takes
// on GPUs, checked on machines that have none (CI). The plugin is the pinned
// PyPI wheel of scripts/xla/requirements.txt, which scripts/xla-cpu-plugin.sh
// installs into hacrl's cache; Backend runs the script on first use, so a
// plain `go test -tags xla` works on a fresh machine. $HACRL_XLA_PLUGIN names
// another CPU plugin file instead. On a machine without the Python package
// index set HACRL_SKIP_PYPI=1: the tests that need the plugin then skip.
package xlatest

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/compute"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/setupscript"
)

// Config is the backend configuration of XLA on the CPU.
const Config = "xla:cpu"

var (
	once   sync.Once
	plugin string
	err    error
)

// Plugin returns the CPU plugin's path, installing it the first time,
// skipping t when HACRL_SKIP_PYPI=1 and failing it when there is none.
func Plugin(t testing.TB) string {
	t.Helper()
	if os.Getenv(backend.XLAPluginEnv) == "" && os.Getenv("HACRL_SKIP_PYPI") == "1" {
		t.Skip("HACRL_SKIP_PYPI=1: skipping the checks on XLA's CPU plugin (scripts/xla-cpu-plugin.sh installs it from PyPI)")
	}
	once.Do(func() { plugin, err = find() })
	if err != nil {
		t.Fatal(err)
	}
	return plugin
}

// Backend returns the shared xla:cpu backend.
func Backend(t testing.TB) compute.Backend {
	t.Helper()
	Plugin(t)
	b, err := backend.New(Config)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// find returns the plugin backend.FindXLAPlugin finds for the CPU, else the
// one scripts/xla-cpu-plugin.sh installs.
func find() (string, error) {
	if p, err := backend.FindXLAPlugin("cpu"); err == nil {
		return p, nil
	}
	p, err := setupscript.Run("xla-cpu-plugin.sh", 10*time.Minute)
	if err != nil {
		return "", fmt.Errorf("xlatest: %w", err)
	}
	if _, err := backend.FindXLAPlugin("cpu"); err != nil {
		return "", fmt.Errorf("xlatest: scripts/xla-cpu-plugin.sh installed %s, but hacrl does not find it: %w", p, err)
	}
	return p, nil
}
