//go:build unix

// Package hacrl_test runs the documentation: the shell blocks of README.md,
// examples/**/README.md and docs/*.md, as a user pastes them into a fresh
// clone, so that docs and code cannot drift apart.
package hacrl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/doctest"
	"github.com/hacrl/hacrl/internal/shared"
)

// docCommands says, for every command of a shell block in the docs, whether
// TestDocCommands runs it (skip == "") or why not. An entry names a file and
// the start of a command as doctest.Command.Flat prints it; with block set it
// covers the whole block that starts with that command. Every command must be
// covered by exactly one entry, and every entry must cover something, so the
// list cannot go stale: a new or changed command block fails the test until
// it is added here.
//
// The commands run in this order, in one sandbox, so a command may use what
// an earlier one wrote (runs/arith-hacpo after the main job). A check, where
// the text says what a command prints or writes, holds it to that.
var docCommands = []docEntry{
	{file: "README.md", cmd: "GOEXPERIMENT=simd go run ./cmd/hacrl train examples/arith-hacpo.yaml", check: checkMainTable},
	{file: "README.md", cmd: "./scripts/test.sh", skip: "the test suite itself (CI runs it)"},
	{file: "README.md", cmd: "GOEXPERIMENT=simd go install ./cmd/hacrl", skip: "the test has built this hacrl and put it first on PATH; go install in the sandbox would compile every package again for its directory (10 s or more)"},
	{file: "README.md", cmd: "hacrl --version", check: checkVersion},
	{file: "README.md", cmd: "source <(hacrl completion bash)"},
	{file: "README.md", cmd: `hacrl completion zsh > "${fpath[1]}/_hacrl"`, skip: "installs into the user's zsh function directory; cmd/hacrl's TestCompletion checks what the completions offer"},
	{file: "README.md", cmd: "hacrl completion fish > ~/.config/fish/completions/hacrl.fish", skip: "installs into the user's fish configuration; cmd/hacrl's TestCompletion checks what the completions offer"},
	{file: "README.md", cmd: "hacrl train examples/arith-hacpo.yaml --set 'agents[llama-bpe].optimizer.lr=2e-4'", skip: "a second 50-step run (about 50 s, over this test's budget); cmd/hacrl's TestTrainSet holds a run with --set to the edited file's metrics"},
	{file: "README.md", cmd: "hacrl train examples/arith-hacpo.yaml --set 'eval.sets=[{name: test, split: test, problems: 50}]' --steps 5", check: checkOverride},
	{file: "README.md", cmd: `echo '[{"role":"user","content":"12+37"}]' > conv.json`},
	{file: "README.md", cmd: "hacrl prompt examples/agents/llama-bpe --messages conv.json", check: checkPrompt},
	{file: "README.md", cmd: `hacrl generate examples/agents/llama-bpe "12+37" "58-21"`, check: checkAnswersInComment},
	{file: "README.md", cmd: `printf '%s\n' '{"prompt":"12+37"}' '{"prompt":"58-21"}' > prompts.jsonl`},
	{file: "README.md", cmd: "hacrl generate runs/arith-hacpo/final/llama-bpe --file prompts.jsonl", check: checkGenerateJSON},
	{file: "README.md", cmd: "hacrl score runs/arith-hacpo/final/llama-bpe --jsonl out.jsonl", check: checkScore},
	{file: "README.md", cmd: "hacrl serve examples/agents/llama-bpe --name arith &"},
	{file: "README.md", cmd: "curl -s --retry 10 --retry-connrefused --retry-delay 1 localhost:8000/health", check: checkHealth},
	{file: "README.md", cmd: "curl -s localhost:8000/v1/chat/completions", check: checkChat},
	{file: "README.md", cmd: `curl -s localhost:8000/v1/completions -d '{"model":"arith","prompt":[1,55,49]`, check: checkLogprobs},
	{file: "README.md", cmd: `curl -s localhost:8000/v1/completions -d '{"model":"arith","prompt":"12+7=19"`, check: checkEcho},
	{file: "README.md", cmd: "curl -s localhost:8000/update_weights_from_disk", check: checkUpdate},
	{file: "README.md", cmd: "GOEXPERIMENT=simd go run ./cmd/hacrl train examples/arith-hacpo.yaml --processes --out runs/arith-hacpo-procs", skip: "a second 50-step run (about 50 s, over this test's budget); cmd/hacrl's TestProcessesMatchOneProcess runs the main example's two agents for 4 steps with --processes and holds them to the one-process run's metrics"},
	{file: "README.md", cmd: "hacrl bench cpu", check: checkBenchCPU},
	{file: "README.md", cmd: "HACRL_KERNELS=portable hacrl --version", check: checkPortableVersion},
	{file: "README.md", cmd: "hacrl bench engine --config bench/configs/qwen2.5-0.5b.json", block: true, skip: "benchmarks of full-size models: minutes to hours and many GB each"},
	{file: "README.md", cmd: "bench/hacpo-step.sh --lora", block: true, skip: "full-size HACPO steps: hours and about 20 GB"},
	{file: "README.md", cmd: "hacrl bench serve examples/agents/llama-bpe", check: checkBenchServe},
	{file: "README.md", cmd: "hacrl bench serve --config bench/configs/qwen3-0.6b.json", skip: "a Qwen3-0.6B-shaped model with all 28 layers: minutes"},
	{file: "README.md", cmd: "hacrl bench serve --url", skip: "measures another server (vLLM, SGLang) at that address; its default --max-tokens and --prompt-vocab do not fit the small agents"},
	{file: "README.md", cmd: "GOEXPERIMENT=simd go test ./bus -run '^$' -bench StepExchange", skip: "a benchmark of 33.5 MB steps (the suite runs the bus package's tests)"},
	{file: "README.md", cmd: "./scripts/build-xla.sh", block: true, skip: "the XLA build (cgo, minutes), pip (the network) and a GPU; docs/gpu.md says how the device check runs"},

	{file: "examples/real/README.md", cmd: "hf download Qwen/Qwen3-0.6B", block: true, skip: "downloads from the Hugging Face Hub (the network, an account for Llama)"},
	{file: "examples/real/README.md", cmd: "hacrl train examples/real/qwen3-llama32-math.yaml --print-defaults", check: checkPrintDefaults},
	{file: "examples/real/README.md", cmd: "hacrl train examples/real/qwen3-llama32-math.yaml", skip: "needs the downloaded checkpoints and days on a CPU; train/real_example_test.go runs the config on random-weight stand-ins"},
	{file: "examples/real/README.md", cmd: "vllm serve", block: true, skip: "needs the real run's output (and vLLM, a GPU)"},
	{file: "examples/real-small/README.md", cmd: "examples/real-small/make-agents.sh", block: true, skip: "two 600-step sft runs, a 30-step HACPO run with full vocabularies (the HACPO run alone 13m42s) and a 30-cell grid of 200-step runs (about 40 h); examples/real-small/realsmall_test.go runs the sft runs, the HACPO run and one of the grid's cells shortened"},

	{file: "docs/gpu.md", cmd: "CGO_ENABLED=1 GOEXPERIMENT=simd go build -tags xla", skip: "the XLA build (cgo, minutes); CI's scripts/test.sh builds and tests it"},
	{file: "docs/gpu.md", cmd: "./scripts/build-xla.sh", skip: "the XLA build for the GPU machine (cgo, minutes)"},
	{file: "docs/processes.md", cmd: "hacrl train examples/arith-hacpo.yaml --processes", skip: "the main example's full run again, with --processes (see README.md's)"},
	{file: "docs/processes.md", cmd: "go build -o hacrl ./cmd/hacrl", block: true, skip: "two terminals; cmd/hacrl's TestAgentJoinsOverTheBus runs this example, shortened"},
	{file: "docs/processes.md", cmd: "GOEXPERIMENT=simd ./hacrl train examples/arith-hacpo.yaml --processes --agents gpt-char", skip: "terminal 1 of the two-terminal example (TestAgentJoinsOverTheBus)"},
	{file: "docs/processes.md", cmd: "GOEXPERIMENT=simd ./hacrl agent examples/arith-hacpo.yaml --agent llama-bpe", skip: "terminal 2 of the two-terminal example (TestAgentJoinsOverTheBus)"},
	{file: "docs/processes.md", cmd: "export HACRL_BUS_TOKEN=… hacrl bus", block: true, skip: "several machines: placeholders (…), TLS files and /data"},
	{file: "docs/processes.md", cmd: "export HACRL_BUS_TOKEN=… hacrl agent run.yaml", block: true, skip: "several machines: placeholders (…, run.yaml, bus-host)"},
	{file: "docs/processes.md", cmd: "GOEXPERIMENT=simd go test ./train -run '^$' -bench StepPayload", skip: "a benchmark of 56.9 MB payloads (the suite runs the train package's tests)"},
	{file: "docs/reward.md", cmd: "go build -o /tmp/arith-reward ./examples/reward/go"},
	{file: "docs/reward.md", cmd: "/tmp/arith-reward -http 127.0.0.1:8000 &"},
	{file: "docs/reward.md", cmd: `curl -s -d '{"version":1,"purpose":"train"`, check: checkOutputInNotes},
}

// docInline are commands written inline in the text that TestDocCommands
// runs too, after the blocks: those the text says to run after the main job.
// Each names its code span exactly.
var docInline = []docEntry{
	{file: "README.md", cmd: "hacrl plot runs/arith-hacpo --grid", check: checkGrid},
	{file: "README.md", cmd: "hacrl rollouts runs/arith-hacpo --step 10", check: checkRollouts},
	{file: "README.md", cmd: "hacrl verify -3 -3"}, // exit 0: equal
	{file: "README.md", cmd: "hacrl --version", check: checkVersion},
}

// A docEntry is one line of docCommands.
type docEntry struct {
	file  string // the Markdown file, from the repository root
	cmd   string // how the command starts (doctest.Command.Flat); for a block, its commands' Flat texts joined by spaces
	block bool   // the entry covers the whole block starting with cmd
	skip  string // why the command is not run; "" runs it
	check func(t *testing.T, r *docRun, c docCmd, out cmdOutput)
}

// A docCmd is one command of the docs with where it is.
type docCmd struct {
	doctest.Command
	file  string
	block int // index in its file's blocks
}

func (c docCmd) String() string { return fmt.Sprintf("%s:%d: %s", c.file, c.Line, c.Flat()) }

// cmdOutput is what a command printed.
type cmdOutput struct{ stdout, stderr string }

// docFiles returns the Markdown files whose shell blocks users run: README.md,
// then examples/**/README.md, then docs/*.md, each group in name order.
func docFiles(t *testing.T) []string {
	files := []string{"README.md"}
	err := filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "README.md" {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	return append(files, docs...)
}

// docBlocks parses the files.
func docBlocks(t *testing.T, files []string) map[string][]doctest.Block {
	blocks := map[string][]doctest.Block{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if blocks[f], err = doctest.Parse(f, src); err != nil {
			t.Fatal(err)
		}
	}
	return blocks
}

// planDocs matches every command of the files' shell blocks with its entry,
// in document order. It reports commands with no entry or two, and entries
// that match nothing.
func planDocs(t *testing.T, files []string, blocks map[string][]doctest.Block, entries []docEntry) (cmds []docCmd, plan []*docEntry) {
	used := make([]int, len(entries))
	for _, f := range files {
		for bi, b := range blocks[f] {
			blockFlat := ""
			for _, c := range b.Commands {
				blockFlat += " " + c.Flat()
			}
			blockFlat = strings.TrimSpace(blockFlat)
			for ci, c := range b.Commands {
				dc := docCmd{c, f, bi}
				var match []int
				for i, e := range entries {
					if e.file != f {
						continue
					}
					if e.block && strings.HasPrefix(blockFlat, e.cmd) || !e.block && strings.HasPrefix(c.Flat(), e.cmd) {
						match = append(match, i)
					}
				}
				// The longest match wins, so that an entry for one command
				// is not also taken as another's that it begins.
				if len(match) > 1 {
					slices.SortStableFunc(match, func(a, b int) int { return len(entries[b].cmd) - len(entries[a].cmd) })
					if len(entries[match[0]].cmd) == len(entries[match[1]].cmd) {
						t.Errorf("%s: two entries of docCommands match it", dc)
					}
					match = match[:1]
				}
				if len(match) == 0 {
					t.Errorf("%s: neither run nor skipped: add it to docCommands (run it, with a check where the text says what it does, or skip it saying why)", dc)
					continue
				}
				e := &entries[match[0]]
				if e.block && ci > 0 {
					continue // the block's first command stands for it
				}
				used[match[0]]++
				cmds, plan = append(cmds, dc), append(plan, e)
			}
		}
	}
	for i, e := range entries {
		if used[i] != 1 {
			t.Errorf("docCommands entry %s %q matches %d commands, want 1 (a command changed or went away: update the entry)", e.file, e.cmd, used[i])
		}
	}
	return cmds, plan
}

// TestDocCommands runs every command of the docs that docCommands does not
// skip, in a copy of the repository's files (what git tracks and does not
// ignore) with ../shared/data beside it, as a fresh clone has them, and holds
// each to what the text says it does. Rewrites, the same for every command:
//
//   - `go run ./cmd/hacrl` is `hacrl`, the same program: the test builds it once
//     from the same files and puts it first on PATH, as the README's
//     `go install` line does;
//   - port 8000 (localhost:8000, 127.0.0.1:8000) is a free port, one per file,
//     and `hacrl serve` without --addr gets --addr on it, so parallel tests and
//     a server already on 8000 do not collide;
//   - /tmp/ is the sandbox's own temporary directory.
//
// A command ending in & runs in the background, as in a shell (the next
// command does not wait for it), and every background process is interrupted
// at the end.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the main example (50 steps, about 50 s)")
	}
	files := docFiles(t)
	cmds, plan := planDocs(t, files, docBlocks(t, files), docCommands)
	r := docSandbox(t)
	r.blocks = docBlocks(t, files)
	t.Cleanup(r.stopBackground)
	for i, c := range cmds {
		e := plan[i]
		if e.skip != "" {
			t.Logf("skipped %s (%s)", c, e.skip)
			continue
		}
		r.runChecked(t, c, e)
	}
	for _, e := range docInline {
		src, err := os.ReadFile(e.file)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(doctest.InlineCode(src), func(sp doctest.Span) bool { return sp.Text == e.cmd })
		if i < 0 {
			t.Errorf("docInline entry %s %q: no such code span (it changed or went away: update the entry)", e.file, e.cmd)
			continue
		}
		sp := doctest.InlineCode(src)[i]
		r.runChecked(t, docCmd{doctest.Command{Line: sp.Line, Text: sp.Text}, e.file, -1}, &e)
	}
}

// runChecked runs c and, when it succeeds, its entry's check.
func (r *docRun) runChecked(t *testing.T, c docCmd, e *docEntry) {
	start := time.Now()
	out, ok := r.run(t, c)
	t.Logf("ran %s in %.1f s", c, time.Since(start).Seconds())
	if ok && e.check != nil {
		e.check(t, r, c, out)
	}
}

// docRun is the sandbox the commands run in.
type docRun struct {
	root   string // holds the others
	dir    string // the repository's copy, where the commands run
	tmp    string // the sandbox's /tmp
	bin    string // holds hacrl
	env    []string
	ports  map[string]int // per Markdown file
	blocks map[string][]doctest.Block

	mu  sync.Mutex
	bgs []*background
}

// background is a process started by a command ending in &.
type background struct {
	cmd    *exec.Cmd
	what   string
	out    bytes.Buffer  // its standard output and error; read only once exited is closed
	exited chan struct{} // closed when it has exited
}

var (
	sandboxOnce sync.Once
	sandbox     *docRun
	sandboxErr  error
)

// TestMain removes the sandbox when the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if sandbox != nil {
		os.RemoveAll(sandbox.root)
	}
	os.Exit(code)
}

// docSandbox returns the sandbox, made once per test binary: the
// repository's files copied to ROOT/hacrl, ROOT/shared/data a link to the
// shared data, and hacrl built into ROOT/bin.
func docSandbox(t *testing.T) *docRun {
	sandboxOnce.Do(func() {
		start := time.Now()
		sandbox, sandboxErr = newDocRun()
		if sandboxErr == nil {
			t.Logf("copied the repository and built hacrl in %.1f s", time.Since(start).Seconds())
		}
	})
	if sandboxErr != nil {
		t.Fatal(sandboxErr)
	}
	return sandbox
}

func newDocRun() (*docRun, error) {
	data, err := shared.Data()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "hacrl-doc-")
	if err != nil {
		return nil, err
	}
	r := &docRun{
		root:  root,
		dir:   filepath.Join(root, "hacrl"),
		tmp:   filepath.Join(root, "tmp"),
		bin:   filepath.Join(root, "bin"),
		ports: map[string]int{},
	}
	for _, d := range []string{r.tmp, filepath.Join(root, "shared")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return r, err
		}
	}
	if err := os.Symlink(data, filepath.Join(root, "shared", "data")); err != nil {
		return r, err
	}
	if err := doctest.CopyTracked(".", r.dir); err != nil {
		return r, err
	}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case shared.DataEnv, shared.SharedEnv, "HACRL_BACKEND", "GOMLX_BACKEND", "PATH", "GOBIN", "TMPDIR", "HACRL_API_KEY":
		default:
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "PATH="+r.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOBIN="+r.bin, "TMPDIR="+r.tmp)
	// Built here, from the files just copied, so that the packages the
	// suite has compiled already are not compiled again for the sandbox's
	// directory.
	cmd := exec.Command("go", "build", "-o", filepath.Join(r.bin, "hacrl"), "./cmd/hacrl")
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=simd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return r, fmt.Errorf("go build ./cmd/hacrl: %v\n%s", err, out)
	}
	return r, nil
}

var port8000 = regexp.MustCompile(`\b(localhost|127\.0\.0\.1):8000\b`)

// rewrite applies TestDocCommands's rewrites to a command of file.
func (r *docRun) rewrite(t *testing.T, file, text string) string {
	text = strings.ReplaceAll(text, "go run ./cmd/hacrl", "hacrl")
	text = regexp.MustCompile(`(^|[\s'"=])/tmp/`).ReplaceAllString(text, "${1}"+r.tmp+"/")
	isServe := strings.HasPrefix(strings.TrimSpace(text), "hacrl serve ")
	if port8000.MatchString(text) || isServe {
		text = port8000.ReplaceAllString(text, fmt.Sprintf("${1}:%d", r.port(t, file)))
		if isServe && !strings.Contains(text, "--addr") {
			text = strings.TrimSuffix(strings.TrimSpace(text), "&") + fmt.Sprintf(" --addr 127.0.0.1:%d &", r.port(t, file))
		}
	}
	return text
}

// port returns file's free port.
func (r *docRun) port(t *testing.T, file string) int {
	if p, ok := r.ports[file]; ok {
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r.ports[file] = l.Addr().(*net.TCPAddr).Port
	return r.ports[file]
}

// run runs one command with bash in the sandbox; it reports a failure and
// returns false when the command exits with another status than 0.
func (r *docRun) run(t *testing.T, c docCmd) (cmdOutput, bool) {
	text := r.rewrite(t, c.file, c.Text)
	if c.Background() {
		return cmdOutput{}, r.background(t, c, text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = r.dir, r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s\nran as: %s\n%v; standard error:\n%s%s", c, text, err, tail(stderr.String(), 40), r.exitedBackground())
		return cmdOutput{stdout.String(), stderr.String()}, false
	}
	return cmdOutput{stdout.String(), stderr.String()}, true
}

// background starts text (ending in &) and returns: as in a shell, the
// next command does not wait for it.
func (r *docRun) background(t *testing.T, c docCmd, text string) bool {
	text = strings.TrimSuffix(strings.TrimSpace(text), "&")
	cmd := exec.Command("bash", "-c", text)
	cmd.Dir, cmd.Env = r.dir, r.env
	bg := background{cmd: cmd, exited: make(chan struct{}), what: c.String()}
	cmd.Stdout, cmd.Stderr = &bg.out, &bg.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Errorf("%s: %v", c, err)
		return false
	}
	go func() { cmd.Wait(); close(bg.exited) }()
	r.mu.Lock()
	r.bgs = append(r.bgs, &bg)
	r.mu.Unlock()
	return true
}

// exitedBackground describes the background processes that have exited, with
// what they printed: why a command that talks to one may have failed.
func (r *docRun) exitedBackground() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, bg := range r.bgs {
		select {
		case <-bg.exited:
			fmt.Fprintf(&b, "\nthe background command %s exited (%v):\n%s", bg.what, bg.cmd.ProcessState, tail(bg.out.String(), 20))
		default:
		}
	}
	return b.String()
}

// stopBackground interrupts the background processes and waits for them, at
// most 10 s each before it kills them.
func (r *docRun) stopBackground() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, bg := range r.bgs {
		pgid := bg.cmd.Process.Pid // the process leads its own group
		syscall.Kill(-pgid, syscall.SIGINT)
		select {
		case <-bg.exited:
		case <-time.After(10 * time.Second):
		}
		syscall.Kill(-pgid, syscall.SIGKILL) // whatever of the group is left
		<-bg.exited
	}
	r.bgs = nil
}

// outputAfter returns the first block without a language after c's block in
// its file: what the text shows the command printing.
func (r *docRun) outputAfter(t *testing.T, c docCmd) doctest.Block {
	for _, b := range r.blocks[c.file][c.block+1:] {
		if b.Lang == "" {
			return b
		}
	}
	t.Fatalf("%s: no output block after it", c)
	return doctest.Block{}
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// jsonLines decodes text as JSON objects, one a line.
func jsonLines(t *testing.T, c docCmd, text string) []map[string]any {
	var vals []map[string]any
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: line %d is not a JSON object (%v): %s", c, i+1, err, line)
		}
		vals = append(vals, v)
	}
	return vals
}

// hasFields reports the fields of want that v lacks.
func hasFields(t *testing.T, c docCmd, what string, v map[string]any, want ...string) {
	for _, f := range want {
		if _, ok := v[f]; !ok {
			t.Errorf("%s: %s has no %q: %v", c, what, f, v)
		}
	}
}

// path walks v along keys (strings for objects, ints for arrays).
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// checkMainTable: the run ends with the README's table, digit for digit.
func checkMainTable(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	want := r.outputAfter(t, c).Lines
	if len(want) == 0 || !strings.HasPrefix(want[0], "agent ") {
		t.Fatalf("%s: the block after it is not the final table: %q", c, want)
	}
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	got := strings.Split(out.stdout, "\n")
	i := slices.IndexFunc(got, func(s string) bool { return norm(s) == norm(want[0]) })
	for k, w := range want {
		if norm(w) == "" {
			continue
		}
		if i < 0 || i+k >= len(got) || norm(got[i+k]) != norm(w) {
			t.Errorf("%s: the final table differs from %s's:\nREADME:\n%s\nthe run:\n%s", c, c.file, strings.Join(want, "\n"), out.stdout)
			return
		}
	}
}

// checkPrompt: one JSON object with the rendered text, its ids, the template
// kind and where it came from.
func checkPrompt(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	v := jsonLines(t, c, out.stdout)
	if len(v) != 1 {
		t.Fatalf("%s: %d JSON objects, want 1", c, len(v))
	}
	hasFields(t, c, "the output", v[0], "text", "ids", "template", "source")
	if s, _ := v[0]["text"].(string); !strings.Contains(s, "12+37") {
		t.Errorf("%s: the prompt text %q lacks conv.json's message", c, s)
	}
}

// checkAnswersInComment: the answers the comment shows (#### N) are printed,
// in that order.
func checkAnswersInComment(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	answers := regexp.MustCompile(`#### -?\d+`).FindAllString(c.Comment, -1)
	if len(answers) == 0 {
		t.Fatalf("%s: its comment shows no answer", c)
	}
	got := regexp.MustCompile(`(?m)^#### -?\d+$`).FindAllString(out.stdout, -1)
	if !slices.Equal(got, answers) {
		t.Errorf("%s: answers %q, the comment says %q:\n%s", c, got, answers, out.stdout)
	}
}

// generateFields are the fields the README says generate --json --logprobs
// writes.
var generateFields = []string{"index", "sample", "prompt", "prompt_ids", "response", "response_ids", "stop", "logprobs", "sum_logprob"}

// checkGenerateJSON: out.jsonl has a line per prompt and sample with the
// fields the README lists.
func checkGenerateJSON(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	data, err := os.ReadFile(filepath.Join(r.dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := jsonLines(t, c, string(data))
	if len(lines) != 2*4 {
		t.Errorf("%s: %d lines, want 2 prompts × 4 samples", c, len(lines))
	}
	for i, v := range lines {
		hasFields(t, c, fmt.Sprintf("out.jsonl line %d", i+1), v, generateFields...)
		if s := v["stop"]; s != "eos" && s != "length" {
			t.Errorf("%s: line %d: stop %v", c, i+1, s)
		}
	}
}

// checkScore: score gives generate's log-probs back, line for line.
func checkScore(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	data, err := os.ReadFile(filepath.Join(r.dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want, got := jsonLines(t, c, string(data)), jsonLines(t, c, out.stdout)
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines for out.jsonl's %d", c, len(got), len(want))
	}
	for i := range got {
		g, _ := got[i]["logprobs"].([]any)
		w, _ := want[i]["logprobs"].([]any)
		if len(g) != len(w) || len(g) == 0 {
			t.Errorf("%s: line %d: %d log-probs, generate gave %d", c, i+1, len(g), len(w))
			continue
		}
		for k := range g {
			if d := math.Abs(g[k].(float64) - w[k].(float64)); d > 1e-4 {
				t.Errorf("%s: line %d token %d: log-prob %v, generate gave %v", c, i+1, k, g[k], w[k])
				break
			}
		}
	}
}

// checkHealth: the server is up.
func checkHealth(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	if v := jsonLines(t, c, out.stdout)[0]; v["status"] != "ok" {
		t.Errorf("%s: %s, want status ok", c, out.stdout)
	}
}

// checkChat: a chat completion whose greedy answer is the sum.
func checkChat(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	v := jsonLines(t, c, out.stdout)[0]
	hasFields(t, c, "the answer", v, "id", "object", "created", "model", "choices", "usage", "weight_version")
	if v["object"] != "chat.completion" || path(v, "choices", 0, "message", "role") != "assistant" {
		t.Errorf("%s: not an assistant's chat.completion: %s", c, out.stdout)
	}
	if s, _ := path(v, "choices", 0, "message", "content").(string); !strings.HasSuffix(s, "#### 49") {
		t.Errorf("%s: the answer to 12+37 is %q, want it to end in #### 49", c, s)
	}
}

// checkLogprobs: legacy log-probs (k ≤ 2 alternatives), and the token ids
// return_token_ids asks for.
func checkLogprobs(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	v := jsonLines(t, c, out.stdout)[0]
	lp, _ := path(v, "choices", 0, "logprobs").(map[string]any)
	hasFields(t, c, "choices[0].logprobs", lp, "tokens", "token_logprobs", "top_logprobs", "text_offset")
	n := len(path(lp, "tokens").([]any))
	for _, f := range []string{"token_logprobs", "top_logprobs", "text_offset"} {
		if a, _ := lp[f].([]any); len(a) != n {
			t.Errorf("%s: %d %s for %d tokens", c, len(a), f, n)
		}
	}
	for _, top := range path(lp, "top_logprobs").([]any) {
		if m, _ := top.(map[string]any); len(m) == 0 || len(m) > 2 {
			t.Errorf("%s: top_logprobs entry %v, want 1 or 2 alternatives", c, top)
		}
	}
	if ids, _ := path(v, "choices", 0, "token_ids").([]any); len(ids) != n {
		t.Errorf("%s: token_ids %v for %d tokens", c, ids, n)
	}
	if ids := path(v, "choices", 0, "prompt_token_ids"); !reflect.DeepEqual(ids, []any{1.0, 55.0, 49.0}) {
		t.Errorf("%s: prompt_token_ids %v, want the prompt's [1 55 49]", c, ids)
	}
}

// checkEcho: echo with max_tokens 0 scores the prompt: its tokens with their
// log-probs, the first null.
func checkEcho(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	v := jsonLines(t, c, out.stdout)[0]
	lps, _ := path(v, "choices", 0, "logprobs", "token_logprobs").([]any)
	if len(lps) < 2 || lps[0] != nil {
		t.Fatalf("%s: token_logprobs %v, want the prompt's, the first null", c, lps)
	}
	for _, x := range lps[1:] {
		if f, ok := x.(float64); !ok || f > 0 {
			t.Errorf("%s: token log-prob %v", c, x)
		}
	}
	if p := path(v, "usage", "prompt_tokens"); p != float64(len(lps)) || path(v, "usage", "completion_tokens") != 0.0 {
		t.Errorf("%s: usage %v for %d prompt tokens scored", c, v["usage"], len(lps))
	}
	if s := path(v, "choices", 0, "text"); s != "12+7=19" {
		t.Errorf("%s: text %v, want the prompt echoed", c, s)
	}
}

// checkUpdate: SGLang's reply, and the new version served.
func checkUpdate(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	v := jsonLines(t, c, out.stdout)[0]
	hasFields(t, c, "the reply", v, "success", "message", "num_paused_requests")
	if v["success"] != true {
		t.Errorf("%s: %s", c, out.stdout)
	}
	cmd := exec.Command("curl", "-s", fmt.Sprintf("localhost:%d/get_weight_version", r.port(t, c.file)))
	got, err := cmd.Output()
	if err != nil || !strings.Contains(string(got), `"1"`) {
		t.Errorf("%s: then /get_weight_version says %s (%v), want version 1", c, got, err)
	}
}

// checkBenchServe: one JSON line per client count with the fields the
// README names; every request generates exactly --max-tokens.
func checkBenchServe(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	lines := jsonLines(t, c, out.stdout)
	clients := []float64{1, 8, 32}
	if len(lines) != len(clients) {
		t.Fatalf("%s: %d lines, want one per client count %v", c, len(lines), clients)
	}
	for i, v := range lines {
		hasFields(t, c, fmt.Sprintf("line %d", i+1), v, "clients", "requests", "generated_tokens", "tokens_per_s",
			"latency_ms_p50", "latency_ms_p99", "speedup", "steps", "shared_steps", "shared_step_fraction", "tokens_per_step", "peak_rss_mb")
		if v["clients"] != clients[i] || v["generated_tokens"] != clients[i]*8*48 {
			t.Errorf("%s: line %d: %v clients generated %v tokens, want %v clients × 8 requests × 48", c, i+1, v["clients"], v["generated_tokens"], clients[i])
		}
	}
}

// checkPrintDefaults: the config in force, with the checkpoints the text
// says to download.
func checkPrintDefaults(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	for _, want := range []string{"name: qwen3-llama32-math", "checkpoint: models/Qwen3-0.6B", "checkpoint: models/Llama-3.2-1B-Instruct"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("%s: the config lacks %q:\n%s", c, want, out.stdout)
		}
	}
}

// checkOverride: the run's config.yaml records the --set and holds its value.
func checkOverride(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	b, err := os.ReadFile(filepath.Join(r.dir, "runs/quick/config.yaml"))
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	for _, want := range []string{"--set 'eval.sets=[{name: test, split: test, problems: 50}]'", "problems: 50", "steps: 5"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: runs/quick/config.yaml lacks %q:\n%s", c, want, b)
		}
	}
}

// checkOutputInNotes: the command prints the JSON the comment under it shows.
func checkOutputInNotes(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	if len(c.Notes) == 0 {
		t.Fatalf("%s: no comment under it shows its output", c)
	}
	var got, want any
	if err := json.Unmarshal([]byte(c.Notes[0]), &want); err != nil {
		t.Fatalf("%s: the comment under it is not JSON: %v", c, err)
	}
	if err := json.Unmarshal([]byte(out.stdout), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: printed %s, the doc shows %s", c, out.stdout, c.Notes[0])
	}
}

// repoInput matches the repository's files that commands read.
var repoInput = regexp.MustCompile(`^(examples|bench|scripts)/\S+\.(yaml|json|sh|py)$`)

// TestDocUsageFlags holds the hacrl commands of the docs to the commands'
// real flags: every --flag that a usage line of the text names
// (`hacrl eval CHECKPOINT --set NAME [--samples k …]`), or a hacrl command of
// a shell block, skipped ones included (`hacrl bench serve --config … --stream`,
// `bin/hacrl-xla train CONFIG --backend xla:cuda`), must be in its command's
// --help. The scripts the blocks run (bench/compare.sh) and the configs they
// name (examples/…/*.yaml, bench/configs/*.json) must exist.
func TestDocUsageFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hacrl")
	}
	r := docSandbox(t)
	type usage struct{ where, text string }
	var usages []usage
	files := docFiles(t)
	blocks := docBlocks(t, files)
	assignment := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=\S*$`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range doctest.InlineCode(src) {
			usages = append(usages, usage{fmt.Sprintf("%s:%d: `%s`", f, sp.Line, sp.Text), strings.ReplaceAll(sp.Text, `\|`, "|")})
		}
		for _, b := range blocks[f] {
			for _, c := range b.Commands {
				words := strings.Fields(strings.ReplaceAll(c.Flat(), "go run ./cmd/hacrl", "hacrl"))
				for len(words) > 0 && assignment.MatchString(words[0]) {
					words = words[1:] // GOEXPERIMENT=simd …
				}
				if len(words) > 0 && (words[0] == "./hacrl" || words[0] == "bin/hacrl-xla") {
					words[0] = "hacrl"
				}
				usages = append(usages, usage{fmt.Sprintf("%s:%d: %s", f, c.Line, c.Flat()), strings.Join(words, " ")})
				// The repository's scripts and input files it names exist.
				for i, w := range words {
					w = strings.TrimPrefix(w, "./")
					script := i == 0 && strings.Contains(w, "/") && !strings.HasPrefix(w, "/")
					input := repoInput.MatchString(w)
					if !script && !input {
						continue
					}
					fi, err := os.Stat(w)
					switch {
					case err != nil:
						t.Errorf("%s:%d: %s: the repository has no %s", f, c.Line, c.Flat(), w)
					case script && fi.Mode()&0o111 == 0:
						t.Errorf("%s:%d: %s: %s is not executable", f, c.Line, c.Flat(), w)
					}
				}
			}
		}
	}

	helps := map[string]map[string]bool{} // flags by command path
	checked := 0
	cmdWord := regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	flagRe := regexp.MustCompile(`(?:^|[\s\[|(])--([a-z][a-z0-9-]*)`)
	helpFlag := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z0-9-]*)`)
	for _, u := range usages {
		words := strings.Fields(u.text)
		if len(words) < 2 || words[0] != "hacrl" {
			continue
		}
		var path []string
		for _, w := range words[1:] {
			if !cmdWord.MatchString(w) || len(path) == 2 {
				break
			}
			path = append(path, w)
		}
		key := strings.Join(path, " ")
		flags, ok := helps[key]
		if !ok {
			cmd := exec.Command(filepath.Join(r.bin, "hacrl"), append(path, "--help")...)
			cmd.Env = r.env
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("hacrl %s --help: %v", key, err)
			}
			flags = map[string]bool{}
			for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
				flags[m[1]] = true
			}
			helps[key] = flags
		}
		checked++
		var unknown []string
		for _, m := range flagRe.FindAllStringSubmatch(u.text, -1) {
			if !flags[m[1]] {
				unknown = append(unknown, "--"+m[1])
			}
		}
		if len(unknown) > 0 {
			t.Errorf("%s: %s not a flag of hacrl %s (see hacrl help %s)", u.where, strings.Join(unknown, ", "), key, key)
		}
	}
	t.Logf("%d usage lines and commands of %d hacrl commands checked", checked, len(helps))
}

// checkGrid: one figure of the run's curves, in OUT/plots.
func checkGrid(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	b, err := os.ReadFile(filepath.Join(r.dir, "runs/arith-hacpo/plots/grid.png"))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s: no PNG in runs/arith-hacpo/plots/grid.png (%v)", c, err)
	}
}

// checkRollouts: what both agents answered at step 10.
func checkRollouts(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	if !strings.HasPrefix(out.stdout, "step 10:") || !strings.Contains(out.stdout, "gpt-char") || !strings.Contains(out.stdout, "llama-bpe") {
		t.Errorf("%s: not both agents' responses at step 10:\n%s", c, tail(out.stdout, 20))
	}
}

// checkVersion: the version line names the program and the Go version.
// checkBenchCPU: the machine line, then the five products the text lists
// on the path in use, each with its fraction of the peak or the bandwidth.
func checkBenchCPU(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
	var machine map[string]any
	if len(lines) != 6 || json.Unmarshal([]byte(lines[0]), &machine) != nil || machine["fma_peak_gflops"] == nil || machine["mem_read_gb_per_s"] == nil {
		t.Fatalf("%s: want a machine line and 5 products:\n%s", c, out.stdout)
	}
	for i, want := range []string{"MatMul", "MatMulBT", "MatMulTAdd", "MatMulBT decode", "MatMulBT decode"} {
		var p map[string]any
		if err := json.Unmarshal([]byte(lines[i+1]), &p); err != nil || p["kernel"] != want || p["path"] != machine["default_path"] {
			t.Errorf("%s: line %d = %s, want %s on %v", c, i+2, lines[i+1], want, machine["default_path"])
		}
	}
}

// checkPortableVersion: HACRL_KERNELS reaches the kernels.
func checkPortableVersion(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	if !strings.HasSuffix(out.stdout, "native kernels portable\n") {
		t.Errorf("%s: %q, want the portable kernels named", c, out.stdout)
	}
}

func checkVersion(t *testing.T, r *docRun, c docCmd, out cmdOutput) {
	if !strings.HasPrefix(out.stdout, "hacrl ") || !strings.Contains(out.stdout, "go1.") {
		t.Errorf("%s: %q", c, out.stdout)
	}
}
