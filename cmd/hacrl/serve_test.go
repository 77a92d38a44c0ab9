package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
)

// hacrl serve serves a saved agent: a request with the seed of generate's
// row gets generate's tokens; the API key comes from the flag or
// $HACRL_API_KEY; an interrupt stops it cleanly.
func TestServeCommand(t *testing.T) {
	agent := lookAgents[0]
	stdout, stderr, code := runHacrl(t, "generate", agent, "12+7", "--json", "--temperature", "1", "--seed", "5", "--max-new-tokens", "20")
	if code != 0 {
		t.Fatalf("generate: %d %s", code, stderr)
	}
	gen := jsonObjects(t, stdout)[0]
	promptIDs, wantIDs := intsOf(t, gen["prompt_ids"]), intsOf(t, gen["response_ids"])

	t.Setenv("HACRL_API_KEY", "k3y")
	var errOut bytes.Buffer
	url, stop := startServe(t, &errOut, agent, "--name", "arith", "--max-batch", "4")
	seed := model.RowSeeds(rand.New(rand.NewPCG(5, 0)), 1)[0]
	body := fmt.Sprintf(`{"model":"arith","prompt":%s,"max_tokens":20,"seed":%d,"return_token_ids":true}`, jsonOf(promptIDs), seed)
	for _, key := range []string{"", "k3y"} {
		req, _ := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if key == "" {
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("without the key: %d %s", resp.StatusCode, data)
			}
			continue
		}
		var got struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &got); err != nil || resp.StatusCode != 200 || len(got.Choices) != 1 {
			t.Fatalf("completion: %d %s", resp.StatusCode, data)
		}
		if !slices.Equal(got.Choices[0].TokenIDs, wantIDs) {
			t.Errorf("served %v, hacrl generate %v", got.Choices[0].TokenIDs, wantIDs)
		}
	}
	if c := stop(); c != 130 {
		t.Errorf("hacrl serve exited %d after the interrupt: %s", c, errOut.String())
	}
	if !strings.Contains(errOut.String(), "serving arith") {
		t.Errorf("stderr: %q", errOut.String())
	}
}

// startServe runs hacrl serve args on a free loopback port until stop
// (an interrupt), which returns its exit status.
func startServe(t *testing.T, errOut *bytes.Buffer, args ...string) (url string, stop func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, append([]string{"serve", "--addr", addr}, args...), strings.NewReader(""), io.Discard, errOut)
	}()
	stop = func() int {
		cancel()
		select {
		case c := <-done:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("hacrl serve did not stop")
		}
		return -1
	}
	t.Cleanup(func() { cancel() })
	url = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url+"/health", nil)
		req.Header.Set("Authorization", "Bearer "+os.Getenv("HACRL_API_KEY"))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/health: %d", resp.StatusCode)
			}
			return url, stop
		}
		select {
		case c := <-done:
			t.Fatalf("hacrl serve exited %d: %s", c, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hacrl serve did not start: %s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postJSON posts body to url and decodes the 200 reply into out.
func postJSON(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(data, out) != nil {
		t.Fatalf("POST %s %s: %d %s", url, body, resp.StatusCode, data)
	}
}

// hacrl serve of a base with --adapter swaps in, through
// /update_weights_from_disk, a full checkpoint (the base alone) and then
// a LoRA adapter directory (onto the served base): each time the tokens
// are the new weights'.
func TestServeUpdateAdapter(t *testing.T) {
	dir := t.TempDir()
	base := must(filepath.Abs(lookAgents[1]))
	adapter := filepath.Join(dir, "adapter")
	adapted := trainedAdapter(t, base, adapter, []string{"q_proj", "v_proj", "down_proj"})
	plain := must(model.Load(must(backend.New(backend.Choose(""))), base))
	tok := must(tokenizer.Load(filepath.Join(base, "tokenizer.json")))
	prompt := []int{1, 5, 6, 7}
	want := func(m *model.Model) []int {
		s := must(m.Generate(context.Background(), [][]int{prompt}, model.SampleOptions{MaxNewTokens: 12, Temperature: 1, Vocab: tok.VocabSize()}, rand.New(rand.NewPCG(2, 0))))
		return s[0].Tokens
	}
	wantAdapted, wantPlain := want(adapted), want(plain)
	if slices.Equal(wantAdapted, wantPlain) {
		t.Fatal("the adapter does not change the sampled tokens; the test would show nothing")
	}
	var errOut bytes.Buffer
	url, stop := startServe(t, &errOut, base, "--adapter", adapter)
	defer stop()
	body := fmt.Sprintf(`{"prompt":%s,"max_tokens":12,"seed":%d,"ignore_eos":true,"return_token_ids":true}`,
		jsonOf(prompt), model.RowSeeds(rand.New(rand.NewPCG(2, 0)), 1)[0])
	type reply struct {
		Choices []struct {
			TokenIDs []int `json:"token_ids"`
		} `json:"choices"`
		WeightVersion string `json:"weight_version"`
	}
	for i, step := range []struct {
		dir  string
		want []int
	}{{"", wantAdapted}, {base, wantPlain}, {adapter, wantAdapted}} {
		if step.dir != "" {
			var up struct {
				Success bool `json:"success"`
			}
			postJSON(t, url+"/update_weights_from_disk", `{"model_path":`+jsonOf(step.dir)+`}`, &up)
			if !up.Success {
				t.Fatalf("update to %s failed", step.dir)
			}
		}
		var r reply
		postJSON(t, url+"/v1/completions", body, &r)
		if !slices.Equal(r.Choices[0].TokenIDs, step.want) || r.WeightVersion != fmt.Sprint(i) {
			t.Errorf("step %d (%s): version %s tokens %v, want %d %v", i, step.dir, r.WeightVersion, r.Choices[0].TokenIDs, i, step.want)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestServeUsageErrors(t *testing.T) {
	agent := lookAgents[1]
	for _, args := range [][]string{
		{"serve"},
		{"serve", agent, "--max-batch", "-1"},
		{"serve", agent, "--max-body-bytes", "-5"},
		{"serve", agent, "--adapter", "x", "--base", "y"},
		{"serve", agent, "--template", "weird"},
	} {
		if _, stderr, code := runHacrl(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

// The main example sampling through two hacrl serve processes
// (examples/arith-hacpo-serve.yaml, shortened) ends with bit for bit the
// metrics of the same run sampling in-process: each response's request
// carries the seed of its in-process random stream, and each server reloads
// its agent's weights after every update. So does the LoRA example, whose
// servers load each update's adapters onto the base they serve.
func TestTrainThroughServe(t *testing.T) {
	for _, example := range []string{"arith-hacpo-serve.yaml", "arith-hacpo-lora.yaml"} {
		t.Run(example, func(t *testing.T) { trainThroughServe(t, example) })
	}
}

// trainThroughServe runs examples/example for 3 steps with its agents
// sampling through hacrl serve processes (rollout sections added after each
// agent's lora line when it has none) and in-process, and compares.
func trainThroughServe(t *testing.T, example string) {
	src, err := os.ReadFile(repoPath(t, "examples/"+example))
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	urls := map[string]string{}
	for _, name := range []string{"gpt-char", "llama-bpe"} {
		urls[name], _ = startServe(t, &errOut, repoPath(t, "examples/agents/"+name))
	}
	dir := t.TempDir()
	cfg := string(src)
	if !strings.Contains(cfg, "rollout:") {
		var lines []string
		agent := ""
		for _, line := range strings.Split(cfg, "\n") {
			lines = append(lines, line)
			if name, ok := strings.CutPrefix(line, "  - name: "); ok {
				agent = name
			}
			if strings.HasPrefix(line, "    lora:") {
				lines = append(lines, fmt.Sprintf("    rollout: {engine: openai, url: %q, model: %s, dialect: hacrl}", urls[agent], agent))
			}
		}
		cfg = strings.Join(lines, "\n")
	}
	for from, to := range map[string]string{
		"steps: 50":                    "steps: 3",
		"problems: 200, samples: 4":    "problems: 24, samples: 2",
		"checkpoint: examples/agents/": "checkpoint: " + repoPath(t, "examples/agents") + "/",
		"http://127.0.0.1:8001":        urls["gpt-char"],
		"http://127.0.0.1:8002":        urls["llama-bpe"],
	} {
		cfg = strings.ReplaceAll(cfg, from, to)
	}
	var local []string // the same run without the rollout sections
	for _, line := range strings.Split(cfg, "\n") {
		if !strings.Contains(line, "rollout: {engine: openai") {
			local = append(local, line)
		}
	}
	values := map[string][]map[string]any{}
	for name, text := range map[string]string{"remote": cfg, "local": strings.Join(local, "\n")} {
		if name == "remote" && strings.Count(text, "rollout: {engine: openai") != 2 {
			t.Fatalf("config has no rollout sections for both agents:\n%s", text)
		}
		path := filepath.Join(dir, name+".yaml")
		out := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		if c := execute(context.Background(), []string{"train", path, "--out", out}, strings.NewReader(""), io.Discard, &stderr); c != 0 {
			t.Fatalf("train %s: exit %d\n%s\nservers: %s", name, c, stderr.String(), errOut.String())
		}
		data, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if name == "remote" && strings.Contains(text, "lora:") { // a LoRA agent pushes its adapters alone
			if d := filepath.Join(out, "rollout-weights", "gpt-char", "v3"); !model.IsAdapterDir(d) {
				t.Errorf("%s is not an adapter directory", d)
			}
		}
		versions := 0
		for _, v := range jsonValues(t, string(data)) {
			if _, ok := v["rollout/weight_version"]; ok {
				versions++
			}
			for k := range v {
				if metrics.IsTiming(k) || strings.HasPrefix(k, "rollout/") || k == "time" {
					delete(v, k)
				}
			}
			values[name] = append(values[name], v)
		}
		if want := map[string]int{"remote": 2 * 3, "local": 0}[name]; versions != want {
			t.Errorf("%s run: %d records with rollout/weight_version, want %d (one per agent and step through a server)", name, versions, want)
		}
	}
	if len(values["local"]) == 0 || !reflect.DeepEqual(values["remote"], values["local"]) {
		t.Errorf("metrics through hacrl serve differ from in-process:\n got %v\nwant %v", values["remote"], values["local"])
	}
}
