// Package shared finds the project's read-only companion directory, ../shared
// beside the repository root, which holds the math benchmarks used by tests,
// examples and evaluation. HACRL_SHARED overrides the location.
package shared

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns the absolute path of the shared directory, searching upward from
// the working directory for the repository root (the directory with go.mod)
// and taking its sibling "shared".
func Dir() (string, error) {
	if d := os.Getenv("HACRL_SHARED"); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(filepath.Dir(dir), "shared")
			if st, err := os.Stat(s); err == nil && st.IsDir() {
				return s, nil
			}
			return "", fmt.Errorf("shared directory not found at %s (set HACRL_SHARED)", s)
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("repository root (go.mod) not found above " + wd + " (set HACRL_SHARED)")
		}
	}
}

// Benchmarks returns the directory of the math benchmarks (gsm8k, aime24,
// amc23, minerva_math), each holding a test.jsonl.
func Benchmarks() (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "data", "benchmarks"), nil
}
