package shared

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFind lays out directories as a user would have them and checks which
// data directory each rule finds, in the rules' order.
func TestFind(t *testing.T) {
	root := t.TempDir()
	mkdir := func(parts ...string) string {
		d := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// root/work/repo (with go.mod) beside root/work/shared/data; a binary
	// in the repository and one in repo/bin; an unrelated root/elsewhere/
	// bin/hacrl whose parent has shared/data; a binary with no data near.
	data := mkdir("work", "shared", "data")
	repo := mkdir("work", "repo")
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := mkdir("work", "repo", "cmd", "sub")
	mkdir("work", "repo", "bin")
	elsewhereData := mkdir("elsewhere", "shared", "data")
	mkdir("elsewhere", "bin")
	lonely := mkdir("lonely", "a", "b")
	custom := mkdir("custom")
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		env      map[string]string
		exe, wd  string
		want     string
		errParts []string
	}{
		{"HACRL_DATA first", map[string]string{DataEnv: custom, SharedEnv: filepath.Join(root, "work", "shared")},
			filepath.Join(repo, "hacrl"), sub, custom, nil},
		{"HACRL_DATA missing is an error", map[string]string{DataEnv: filepath.Join(root, "nope")},
			filepath.Join(repo, "hacrl"), sub, "", []string{"$HACRL_DATA", "nope"}},
		{"HACRL_DATA a file is an error", map[string]string{DataEnv: file}, "", "", "", []string{"not a directory"}},
		{"HACRL_SHARED", map[string]string{SharedEnv: filepath.Join(root, "work", "shared")},
			filepath.Join(lonely, "hacrl"), lonely, data, nil},
		{"binary in the repository root", nil, filepath.Join(repo, "hacrl"), lonely, data, nil},
		{"binary in a folder of the repository", nil, filepath.Join(repo, "bin", "hacrl"), lonely, data, nil},
		{"binary's parent before the repository", nil, filepath.Join(root, "elsewhere", "bin", "hacrl"), sub, elsewhereData, nil},
		{"repository above the working directory", nil, filepath.Join(lonely, "hacrl"), sub, data, nil},
		{"nothing found lists the places", nil, filepath.Join(lonely, "hacrl"), lonely, "",
			[]string{"$HACRL_DATA", "$HACRL_SHARED", filepath.Join(root, "lonely", "a", "shared", "data"),
				filepath.Join(root, "lonely", "shared", "data"), "no repository (go.mod) above the working directory " + lonely, "--data DIR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := find(func(k string) string { return tt.env[k] }, tt.exe, tt.wd)
			if tt.errParts != nil {
				if err == nil {
					t.Fatalf("found %s, want an error", got)
				}
				for _, p := range tt.errParts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q does not mention %q", err, p)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("found %s, want %s", got, tt.want)
			}
		})
	}
}

// TestDataFromAnotherDirectory finds the real data directory from the
// repository, then from a directory outside it through HACRL_DATA.
func TestDataFromAnotherDirectory(t *testing.T) {
	d, err := Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "benchmarks", "gsm8k", "test.jsonl")); err != nil {
		t.Fatalf("data directory %s has no gsm8k: %v", d, err)
	}
	t.Chdir(t.TempDir())
	t.Setenv(DataEnv, "")
	t.Setenv(SharedEnv, "")
	if got, err := Data(); err == nil {
		t.Errorf("outside the repository with no variable set, found %s", got)
	}
	t.Setenv(DataEnv, d)
	if got, err := Benchmarks(); err != nil || got != filepath.Join(d, "benchmarks") {
		t.Errorf("Benchmarks() = %s, %v; want %s", got, err, filepath.Join(d, "benchmarks"))
	}
}
