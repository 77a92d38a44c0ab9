// Package setupscript runs the checkout's own setup scripts for tests:
// scripts/pyenv.sh, scripts/xla-cpu-plugin.sh and the like, which install a
// pinned dependency once (cached) and print where it is. Tests call them on
// first use, so a plain `go test` works on a fresh machine.
package setupscript

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hacrl/hacrl/internal/shared"
)

// Run runs scripts/name of the checkout above the working directory, for
// at most timeout, and returns the last line it printed on standard output
// (its result: a path). A failure carries the script's standard error.
func Run(name string, timeout time.Duration) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, ok := shared.RepoRoot(wd)
	if !ok {
		return "", fmt.Errorf("no go.mod above %s: run the tests inside the hacrl repository", wd)
	}
	script := filepath.Join(root, "scripts", name)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return "", fmt.Errorf("%s printed nothing\n%s", script, stderr.String())
	}
	return last, nil
}
