package main

import (
	"context"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/kernel"
)

// TestVersion: hacrl --version prints one line with the module version and
// commit, the Go version and platform, whether XLA is built in and the
// native kernels' path; a build stamped with its commit names it.
func TestVersion(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := execute(context.Background(), []string{"--version"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("--version: status %d\n%s", code, stderr.String())
	}
	line := stdout.String()
	for _, want := range []string{"hacrl ", " " + runtime.Version() + " ", runtime.GOOS + "/" + runtime.GOARCH, "without XLA", "native kernels " + kernel.Path() + "\n"} {
		if !strings.Contains(line, want) {
			t.Errorf("--version printed %q, want %q in it", line, want)
		}
	}
	if strings.Count(line, "\n") != 1 || strings.Contains(line, "{{") {
		t.Errorf("--version printed %q, want one plain line", line)
	}

	// A build the toolchain stamps with the checkout's commit.
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout to stamp a build with: %v", err)
	}
	bin := t.TempDir() + "/hacrl"
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(build.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^hacrl v\S+ \(commit ` + strings.TrimSpace(string(rev)) + `(\+dirty)?\) go`)
	if !want.Match(out) {
		t.Errorf("stamped build: --version printed %q, want its commit %s", out, strings.TrimSpace(string(rev)))
	}
}
