// Package shared finds the shared data directory: the math benchmarks and
// training sets (benchmarks/<set>/test.jsonl, train/<set>/train.jsonl) that
// evaluation, examples and tests load by name. It lives outside the
// repository, read-only, as ../shared/data beside the repository root.
//
// The data directory is the first of:
//
//  1. $HACRL_DATA (the command line's --data DIR sets it);
//  2. $HACRL_SHARED/data (HACRL_SHARED names the whole shared directory);
//  3. shared/data in the parent or the grandparent of the directory holding
//     the running binary (<bin>/../shared/data, <bin>/../../shared/data), so
//     a binary built in the repository root or in a folder under it finds
//     the data from any working directory;
//  4. ../shared/data beside the repository root (the directory with go.mod)
//     found upward from the working directory, as for go run and go test.
//
// A directory named by an environment variable must exist; the automatic
// places are tried in order, and the error when none has the data lists
// every place looked at.
package shared

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The environment variables of the search.
const (
	// DataEnv names the data directory itself.
	DataEnv = "HACRL_DATA"
	// SharedEnv names the shared directory, whose data subdirectory is used.
	SharedEnv = "HACRL_SHARED"
)

// Data returns the absolute path of the shared data directory (see the
// package doc for the search).
func Data() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		exe = ""
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	return find(os.Getenv, exe, wd)
}

// Benchmarks returns the directory of the math benchmarks, each holding a
// test.jsonl: Data()/benchmarks.
func Benchmarks() (string, error) {
	d, err := Data()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "benchmarks"), nil
}

// Dir returns the shared directory, the parent of the data directory.
func Dir() (string, error) {
	d, err := Data()
	if err != nil {
		return "", err
	}
	return filepath.Dir(d), nil
}

// find is Data with its inputs explicit: getenv reads the environment, exe
// is the running binary's path and wd the working directory ("" when
// unknown).
func find(getenv func(string) string, exe, wd string) (string, error) {
	if d := getenv(DataEnv); d != "" {
		return existing(d, DataEnv)
	}
	if d := getenv(SharedEnv); d != "" {
		return existing(filepath.Join(d, "data"), SharedEnv+"/data")
	}
	var looked []string
	seen := map[string]bool{}
	try := func(dir, why string) bool {
		if seen[dir] {
			return false
		}
		seen[dir] = true
		looked = append(looked, dir+" ("+why+")")
		st, err := os.Stat(dir)
		return err == nil && st.IsDir()
	}
	if exe != "" {
		bin := filepath.Dir(exe)
		for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
			if dir := filepath.Join(d, "shared", "data"); try(dir, "beside the binary "+exe) {
				return dir, nil
			}
		}
	}
	if wd != "" {
		if root, ok := RepoRoot(wd); ok {
			if dir := filepath.Join(filepath.Dir(root), "shared", "data"); try(dir, "beside the repository "+root) {
				return dir, nil
			}
		} else {
			looked = append(looked, "no repository (go.mod) above the working directory "+wd)
		}
	}
	return "", errors.New("shared data directory not found; looked in $" + DataEnv + " and $" + SharedEnv +
		" (both unset), " + strings.Join(looked, ", ") + "; pass --data DIR or set " + DataEnv +
		" to the directory holding benchmarks/ and train/")
}

// existing returns dir made absolute when it is a directory; what names the
// directory to the user.
func existing(dir, what string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("shared data directory $%s: %w", what, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("shared data directory $%s: %w", what, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("shared data directory $%s: %s is not a directory", what, abs)
	}
	return abs, nil
}

// RepoRoot returns the nearest directory at or above wd holding a go.mod:
// the root of the hacrl checkout a command or a test runs in.
func RepoRoot(wd string) (string, bool) {
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		if filepath.Dir(dir) == dir {
			return "", false
		}
	}
}
