package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hacrl/hacrl/internal/shared"
)

// The tests run the real binary: what reaches standard output is what any
// code in the process writes there, the library's included.

var (
	buildOnce sync.Once
	buildDir  string // holds bin/hacrl and shared/data (a link to the real data)
	buildErr  error
)

// hacrlBin builds the command once per test binary into a temporary layout
// DIR/bin/hacrl with DIR/shared/data beside it, as a user's checkout has it.
func hacrlBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		data, err := shared.Data()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "hacrl-cli-test-"); buildErr != nil {
			return
		}
		if buildErr = os.MkdirAll(filepath.Join(buildDir, "shared"), 0o755); buildErr != nil {
			return
		}
		if buildErr = os.Symlink(data, filepath.Join(buildDir, "shared", "data")); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "bin", "hacrl"), ".")
		cmd.Env = append(os.Environ(), "GOEXPERIMENT=simd")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "bin", "hacrl")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// run runs bin with args in dir (a fresh temporary directory when ""),
// with the environment's data and backend variables replaced by env.
func run(t *testing.T, bin, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case shared.DataEnv, shared.SharedEnv, "HACRL_BACKEND", "GOMLX_BACKEND":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The backend option that made GoMLX print on standard output.
	cmd.Env = append(cmd.Env, "HACRL_BACKEND=go:parallelism=-1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// jsonValues decodes standard output as a sequence of JSON objects and fails
// on anything else.
func jsonValues(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(stdout))
	var vals []map[string]any
	for {
		var v map[string]any
		err := d.Decode(&v)
		if err == io.EOF {
			return vals
		}
		if err != nil {
			t.Fatalf("standard output is not only JSON objects (%v):\n%s", err, stdout)
		}
		vals = append(vals, v)
	}
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestJSONStdout runs the commands that promise JSON and checks that their
// standard output is that JSON and nothing else.
func TestJSONStdout(t *testing.T) {
	bin := hacrlBin(t)
	agent := repoPath(t, "examples/agents/gpt-char")
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		values int
		key    string // present in every value
		stderr string // part of standard error
	}{
		{name: "eval", args: []string{"eval", agent, "--set", "test", "--problems", "3"}, values: 1, key: "greedy_acc"},
		{name: "bench engine", args: []string{"bench", "engine", "--dim", "16", "--layers", "1", "--heads", "2", "--kv-heads", "2",
			"--seq", "8", "--batch", "2", "--steps", "1", "--warmup", "0", "--sample-runs", "1", "--threads", "1"},
			values: 1, key: "train_tokens_per_s"},
		{name: "verify --jsonl", stdin: `{"answer": "-3", "reference": "-3"}
{"answer": "\\boxed{1/2}", "reference": "0.5"}
{"answer": "7", "reference": "8"}
`, args: []string{"verify", "--jsonl", "-"}, values: 3, key: "equal"},
		{name: "verify --jsonl, a bad line", stdin: `{"answer": "1", "reference": "1"}
not json
{"answer": "2", "reference": "2"}
`, args: []string{"verify", "--jsonl", "-"}, code: 1, values: 2, key: "equal", stderr: "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, bin, "", tt.stdin, nil, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			vals := jsonValues(t, r.stdout)
			if len(vals) != tt.values {
				t.Errorf("%d JSON values on standard output, want %d:\n%s", len(vals), tt.values, r.stdout)
			}
			for _, v := range vals {
				if _, ok := v[tt.key]; !ok {
					t.Errorf("JSON value without %q: %v", tt.key, v)
				}
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("standard error %q does not mention %q", r.stderr, tt.stderr)
			}
		})
	}
}

// TestExitCodes checks the documented exit status of success, failure,
// "not equal" and usage errors.
func TestExitCodes(t *testing.T) {
	bin := hacrlBin(t)
	agent := repoPath(t, "examples/agents/gpt-char")
	tests := []struct {
		args   []string
		code   int
		stdout string
	}{
		{args: []string{"verify", "0.5", `\frac{1}{2}`}, code: 0, stdout: "equal\n"},
		{args: []string{"verify", "1", "2"}, code: 1, stdout: "not equal\n"},
		{args: []string{"verify", "-3", "-3"}, code: 0, stdout: "equal\n"},
		{args: []string{"verify", "-3", "3"}, code: 1, stdout: "not equal\n"},
		{args: []string{"verify", "3", "-3"}, code: 1, stdout: "not equal\n"},
		{args: []string{"verify", "-.5", `-\frac{1}{2}`}, code: 0, stdout: "equal\n"},
		{args: []string{"verify", "--", "-3", "-3"}, code: 0, stdout: "equal\n"},
		{args: []string{"help"}, code: 0},
		{args: []string{"eval", filepath.Join(t.TempDir(), "missing")}, code: 1},
		{args: []string{"verify", "1"}, code: 2},
		{args: []string{"verify"}, code: 2},
		{args: []string{"verify", "1", "2", "3"}, code: 2},
		{args: []string{"verify", "--nope", "1", "1"}, code: 2},
		{args: []string{"verify", "--jsonl", "-", "-3"}, code: 2},
		{args: []string{"eval"}, code: 2},
		{args: []string{"eval", agent, "--problems", "three"}, code: 2},
		{args: []string{"eval", agent, "extra"}, code: 2},
		{args: []string{"bench", "engine", "extra"}, code: 2},
		{args: []string{"bench", "engine", "--sample-runs", "0"}, code: 2},
		{args: []string{"bench", "nope"}, code: 2},
		{args: []string{"trian", "x.yaml"}, code: 2},
		{args: []string{"--data", filepath.Join(t.TempDir(), "nope"), "verify", "1", "1"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := run(t, bin, "", "", nil, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit status %d, want %d; stdout %q, stderr %q", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.stdout != "" && r.stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tt.stdout)
			}
			if usageHint := strings.Contains(r.stderr, "--help' for usage"); usageHint != (tt.code == 2) {
				t.Errorf("exit status %d with stderr %q", r.code, r.stderr)
			}
		})
	}
}

// TestSharedDataFromAnotherDirectory loads a shared benchmark from a working
// directory outside the repository: found beside the binary, through
// HACRL_DATA and --data, and, with none of them, refused with the places
// looked at. The agent's context is too short for the problems, so the
// command stops after loading them, naming the first problem.
func TestSharedDataFromAnotherDirectory(t *testing.T) {
	bin := hacrlBin(t)
	data, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(filepath.Dir(bin)), "shared", "data"))
	if err != nil {
		t.Fatal(err)
	}
	lonely := filepath.Join(t.TempDir(), "hacrl")
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lonely, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := repoPath(t, "examples/agents/gpt-char")
	eval := []string{"eval", agent, "--set", "math500", "--problems", "1"}
	const loaded = "problem math500/test/precalculus/807.json"
	tests := []struct {
		name   string
		bin    string
		env    []string
		args   []string
		stderr []string
	}{
		{"beside the binary", bin, nil, eval, []string{loaded}},
		{"HACRL_DATA", lonely, []string{shared.DataEnv + "=" + data}, eval, []string{loaded}},
		{"HACRL_SHARED", lonely, []string{shared.SharedEnv + "=" + filepath.Dir(data)}, eval, []string{loaded}},
		{"--data", lonely, nil, append([]string{"--data", data}, eval...), []string{loaded}},
		{"not found", lonely, nil, eval, []string{"shared data directory not found", "$HACRL_DATA", "beside the binary " + lonely,
			"no repository (go.mod) above the working directory", "--data DIR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.bin, "", "", tt.env, tt.args...)
			if r.code != 1 || r.stdout != "" {
				t.Errorf("exit status %d, stdout %q; want 1 and nothing", r.code, r.stdout)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("standard error %q does not mention %q", r.stderr, s)
				}
			}
		})
	}
}

// TestPositionalNumbers checks which arguments move behind "--": signed
// numbers and math are positional, flags and flag values are not.
func TestPositionalNumbers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"verify -3 -3", "verify -- -3 -3"},
		{"verify 3 -3", "verify -- 3 -3"},
		{`verify -\frac{1}{2} -.5`, `verify -- -\frac{1}{2} -.5`},
		{"--data d verify -3 -3", "verify --data d -- -3 -3"},
		{"verify -3 --jsonl f", "verify --jsonl f -- -3"},
		{"verify -- -3 -3", "verify -- -3 -3"},
		{"verify 1 2", "verify 1 2"},
		{"eval ckpt --temperature -0.5 --set test", "eval ckpt --temperature -0.5 --set test"},
		{"eval ckpt --temperature -0.5 -3", "eval --temperature -0.5 -- ckpt -3"},
		{"eval -h", "eval -h"},
		{"bench engine --seed -1 --threads 1", "bench engine --seed -1 --threads 1"},
		{"verify --jsonl -", "verify --jsonl -"},
		{"-3", "-- -3"},
	}
	for _, tt := range tests {
		if got := strings.Join(positionalNumbers(rootCmd(), strings.Fields(tt.in)), " "); got != tt.want {
			t.Errorf("positionalNumbers(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// bench engine reports the process's peak resident memory, and it grows
// with the model: a 12.8M-parameter embedding (51 MB of float32 weights,
// plus gradient and AdamW moments) adds at least its weights' size.
func TestBenchPeakMemory(t *testing.T) {
	bin := hacrlBin(t)
	peak := func(vocab string) float64 {
		args := []string{"bench", "engine", "--vocab", vocab, "--dim", "32", "--layers", "1", "--heads", "2", "--kv-heads", "2",
			"--seq", "8", "--batch", "2", "--steps", "1", "--warmup", "0", "--sample-runs", "1", "--threads", "1"}
		r := run(t, bin, "", "", nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
		vals := jsonValues(t, r.stdout)
		mb, ok := vals[0]["peak_rss_mb"].(float64)
		if len(vals) != 1 || !ok || mb <= 0 {
			t.Fatalf("%v: peak_rss_mb missing or not positive in %v", args, vals)
		}
		return mb
	}
	small, large := peak("32"), peak("400000")
	if weights := 400000.0 * 32 * 4 / (1 << 20); large-small < weights {
		t.Errorf("peak_rss_mb %v with a 400000-token vocabulary, %v with 32: the difference is below the embedding's %.0f MB", large, small, weights)
	}
}
