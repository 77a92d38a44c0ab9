// Package torchtest finds the Python interpreter with PyTorch that tests
// cross-check hacrl against (the reference in bench/torch): $PYTHON, or
// Debian's /usr/bin/python3 with python3-torch, which scripts/test.sh
// installs. Without one a test fails, saying how to get it, unless
// HACRL_TORCH=skip.
package torchtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python returns an interpreter that imports torch, or fails (or, with
// HACRL_TORCH=skip, skips) t.
func Python(t testing.TB) string {
	t.Helper()
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		if os.Getenv("HACRL_TORCH") == "skip" {
			t.Skipf("HACRL_TORCH=skip: %s cannot import torch", python)
		}
		t.Fatalf("%s cannot import torch (%v: %s): run scripts/test.sh, which installs python3-torch with apt-get, "+
			"set PYTHON to an interpreter with torch, or set HACRL_TORCH=skip", python, err, strings.TrimSpace(string(out)))
	}
	return python
}
