// Package pyenv gives tests the project's pinned Python environment: the
// real libraries users load hacrl's files with — transformers, PEFT,
// safetensors, tokenizers, TensorBoard — Hugging Face's math-verify, and
// PyTorch, used as independent oracles (and TRL, which bench/trl measures
// hacrl against). scripts/pyenv.sh installs them,
// with the versions and hashes of scripts/pyenv/requirements.txt, into a
// cached virtualenv (see that script); Python runs it on first use, so a
// plain `go test` works on a fresh machine, and scripts/test.sh runs it
// before the tests so that the install's time is reported on its own.
//
// $HACRL_PYTHON names another interpreter to use instead (one that has the
// same packages). On a machine without the Python package index set
// HACRL_SKIP_PYPI=1: the tests that need the environment then skip. CI never
// sets it.
package pyenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/setupscript"
)

// Hint is appended to errors about a missing environment.
const Hint = " (set HACRL_SKIP_PYPI=1 to skip the checks against the Python libraries on a machine without the Python package index)"

var (
	once   sync.Once
	python string
	err    error
)

// Python returns the interpreter of the project's Python environment,
// installing it the first time (which takes a few minutes), skipping t when
// HACRL_SKIP_PYPI=1 and failing it when the environment cannot be had.
func Python(t testing.TB) string {
	t.Helper()
	if os.Getenv("HACRL_SKIP_PYPI") == "1" {
		t.Skip("HACRL_SKIP_PYPI=1: skipping the check against the Python libraries")
	}
	once.Do(func() { python, err = find() })
	if err != nil {
		t.Fatal(err)
	}
	return python
}

// find returns $HACRL_PYTHON, or the interpreter scripts/pyenv.sh prints.
func find() (string, error) {
	if p := os.Getenv("HACRL_PYTHON"); p != "" {
		return p, nil
	}
	p, err := setupscript.Run("pyenv.sh", 20*time.Minute)
	if err != nil {
		return "", fmt.Errorf("pyenv: %w%s", err, Hint)
	}
	return p, nil
}

// Run runs the Python script (a path, relative to the test's package
// directory or absolute) with args under the environment's interpreter,
// writes req to its standard input as JSON, and decodes the JSON the script
// prints on standard output into res (unless res is nil). Anything the
// script writes to standard error is shown when it fails.
func Run(t testing.TB, script string, req, res any, args ...string) {
	t.Helper()
	py := Python(t)
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python %s: %v\n%s", script, err, stderr.String())
	}
	if res == nil {
		return
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("python %s: decoding its output: %v\n%.2000s\n%s", script, err, out, stderr.String())
	}
}

// Env is the environment the oracles run in: this process's, offline (the
// Hugging Face libraries never reach for the hub: everything they load is a
// local directory) and without telemetry or progress bars.
func Env() []string {
	return append(os.Environ(),
		"HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "HF_HUB_DISABLE_TELEMETRY=1",
		"HF_HUB_DISABLE_PROGRESS_BARS=1", "TOKENIZERS_PARALLELISM=false", "PYTHONHASHSEED=0",
		"TRANSFORMERS_VERBOSITY=error")
}
