package config

import (
	"strings"
	"testing"
	"time"
)

// TestRolloutSection: an agent's rollout section, its defaults and every
// check, each error naming its key path and line.
func TestRolloutSection(t *testing.T) {
	tests := []struct {
		name, section, want string
	}{
		{"local", "rollout: {engine: local}", ""},
		{"vllm", "rollout: {engine: openai, url: 'http://127.0.0.1:8000', model: m, dialect: vllm, weights_dir: w, api_key_env: VLLM_KEY, timeout: 30s, concurrency: 4, retries: 1, max_stale_retries: 0}", ""},
		{"sglang", "rollout: {engine: openai, url: 'http://127.0.0.1:30000', dialect: sglang}", ""},
		{"hacrl", "rollout: {engine: openai, url: 'http://127.0.0.1:8000', model: a, dialect: hacrl}", ""},
		{"bad engine", "rollout: {engine: vllm}", `agents[1].rollout.engine (line 20): must be local or openai, got "vllm"`},
		{"local with url", "rollout: {url: 'http://127.0.0.1:1'}", "agents[1].rollout.url (line 20): only with engine: openai"},
		{"no url", "rollout: {engine: openai, dialect: sglang}", "agents[1].rollout.url (line 20): required with engine openai"},
		{"bad scheme", "rollout: {engine: openai, dialect: sglang, url: 'grpc://h:1'}", `agents[1].rollout.url (line 20): must start with http:// or https://`},
		{"no host", "rollout: {engine: openai, dialect: sglang, url: 'http:///x'}", "agents[1].rollout.url (line 20): has no host"},
		{"no dialect", "rollout: {engine: openai, url: 'http://127.0.0.1:1'}", "agents[1].rollout.dialect (line 20): required with engine openai"},
		{"bad dialect", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: ollama}", `agents[1].rollout.dialect (line 20): must be vllm, sglang or hacrl, got "ollama"`},
		{"no model", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: hacrl}", "agents[1].rollout.model (line 20): required with dialect hacrl"},
		{"vllm without weights_dir", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: vllm, model: m}", "agents[1].rollout.weights_dir (line 20): required with dialect vllm"},
		{"key not a name", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: sglang, api_key_env: 'sk-123'}", "agents[1].rollout.api_key_env (line 20): must be the name of an environment variable"},
		{"bad timeout", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: sglang, timeout: 30}", `agents[1].rollout.timeout (line 20): must be a duration like 30s or 10m, got "30"`},
		{"zero concurrency", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: sglang, concurrency: -1}", "agents[1].rollout.concurrency (line 20): must be > 0"},
		{"negative retries", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: sglang, retries: -1}", "agents[1].rollout.retries (line 20): must be >= 0"},
		{"negative stale retries", "rollout: {engine: openai, url: 'http://127.0.0.1:1', dialect: sglang, max_stale_retries: -2}", "agents[1].rollout.max_stale_retries (line 20): must be >= 0"},
		{"unknown key", "rollout: {engine: openai, adress: x}", "agents[1].rollout.adress (line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at := "    sampling: {max_new_tokens: 16, top_p: 0.9}\n"
			c, err := Parse([]byte(strings.Replace(valid, at, at+"    "+tc.section+"\n", 1)))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Agents[0].Rollout.Remote() {
				t.Error("agent a has no rollout section and samples remotely")
			}
			r := c.Agents[1].Rollout
			if r == nil {
				t.Fatal("no rollout section")
			}
			switch tc.name {
			case "local":
				if r.Remote() || r.Concurrency != 16 || *r.Retries != 3 || *r.MaxStaleRetries != 2 || r.TimeoutDuration() != 10*time.Minute {
					t.Errorf("defaults: %+v", r)
				}
			case "vllm":
				if !r.Remote() || r.Concurrency != 4 || *r.Retries != 1 || *r.MaxStaleRetries != 0 || r.TimeoutDuration() != 30*time.Second {
					t.Errorf("values: %+v", r)
				}
			default:
				if !r.Remote() {
					t.Errorf("not remote: %+v", r)
				}
			}
		})
	}
}

// TestRolloutExampleConfig: the main example through hacrl serve is the
// main example with only the agents' rollout sections added.
func TestRolloutExampleConfig(t *testing.T) {
	serve, err := Load("../examples/arith-hacpo-serve.yaml")
	if err != nil {
		t.Fatal(err)
	}
	main, err := Load("../examples/arith-hacpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range serve.Agents {
		if !a.Rollout.Remote() || a.Rollout.Dialect != DialectHacrl || a.Rollout.Model != a.Name {
			t.Errorf("agents[%d].rollout: %+v", i, a.Rollout)
		}
		serve.Agents[i].Rollout = nil
	}
	serve.Name, serve.Out = main.Name, main.Out
	if !sameValues(serve, main) {
		t.Errorf("the serve example differs from the main example beyond its rollout sections:\n%+v\n%+v", serve, main)
	}
}
