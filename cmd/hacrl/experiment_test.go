package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestExperimentArchive rebuilds each long grid's report from the archived
// cells under docs/results/long-grid, as its page says: the text equals the
// committed report, and a grid directory archived again with --archive
// carries the same report and reads back the same.
func TestExperimentArchive(t *testing.T) {
	for _, g := range []string{"long", "skills"} {
		t.Run(g, func(t *testing.T) { checkArchivedGrid(t, g) })
	}
}

func checkArchivedGrid(t *testing.T, g string) {
	bin := hacrlBin(t)
	repo := repoPath(t, ".")
	config := "examples/experiment/grid-" + g + ".yaml"
	archived := filepath.Join(repo, "docs", "results", "long-grid", g)
	want, err := os.ReadFile(filepath.Join(archived, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	grid := filepath.Join(t.TempDir(), "grid")
	if err := os.MkdirAll(grid, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(archived, "cells"), grid).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	arch := filepath.Join(t.TempDir(), "archive")
	r := run(t, bin, repo, "", nil, "experiment", config, "--report-only", "--out", grid, "--archive", arch)
	if r.code != 0 {
		t.Fatalf("experiment --report-only --archive: exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != string(want) {
		t.Errorf("the report rebuilt from docs/results/long-grid/%s/cells differs from its report.md: rebuild it with\n"+
			"  hacrl experiment %s --report-only --out docs/results/long-grid/%s\n%s", g, config, g, firstDiff(r.stdout, string(want)))
	}
	for _, dir := range []string{grid, arch} {
		got, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil || string(got) != r.stdout {
			t.Errorf("%s/report.md (%v) differs from the printed report", dir, err)
		}
	}
	if !strings.Contains(r.stderr, "archived ") {
		t.Errorf("stderr lacks the archive line:\n%s", r.stderr)
	}
	again := run(t, bin, repo, "", nil, "experiment", config, "--report-only", "--out", arch)
	if again.code != 0 || again.stdout != r.stdout {
		t.Errorf("the report read back from the new archive differs (exit %d):\n%s", again.code, firstDiff(again.stdout, r.stdout))
	}
}

// firstDiff names the first line where two texts differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  got:  " + g[i] + "\n  want: " + w[i]
		}
	}
	return "lengths " + strconv.Itoa(len(g)) + " and " + strconv.Itoa(len(w)) + " lines"
}
