package config

import (
	"testing"
	"time"
)

func TestRewardSection(t *testing.T) {
	tests := []struct {
		name, section, want string
	}{
		{"command", "reward: {command: [python3, r.py]}", ""},
		{"url with token", "reward: {url: 'http://127.0.0.1:8000/reward', token_env: REWARD_TOKEN, timeout: 5s, batch_size: 64, eval: true}", ""},
		{"neither", "reward: {timeout: 5s}", "reward (line 23): give exactly one of command (an argv list) or url"},
		{"both", "reward: {command: [r], url: 'http://127.0.0.1:1'}", "reward (line 23): give exactly one of command"},
		{"command not a list", "reward: {command: python3 r.py}", "reward.command (line"},
		{"empty program", "reward: {command: ['', r.py]}", "reward.command[0] (line 23): must name a program"},
		{"bad scheme", "reward: {url: 'ftp://127.0.0.1/r'}", `reward.url (line 23): must start with http:// or https://, got "ftp://127.0.0.1/r"`},
		{"no host", "reward: {url: 'http:///reward'}", "reward.url (line 23): has no host"},
		{"token with command", "reward: {command: [r], token_env: T}", "reward.token_env (line 23): only with url"},
		{"token not a name", "reward: {url: 'http://127.0.0.1:1', token_env: 'Bearer abc'}", `reward.token_env (line 23): must be the name of an environment variable`},
		{"bad timeout", "reward: {command: [r], timeout: 30}", `reward.timeout (line 23): must be a duration like 30s or 2m, got "30"`},
		{"zero timeout", "reward: {command: [r], timeout: 0s}", `reward.timeout (line 23): must be > 0, got "0s"`},
		{"bad start timeout", "reward: {command: [r], start_timeout: soon}", `reward.start_timeout (line 23): must be a duration`},
		{"negative batch", "reward: {command: [r], batch_size: -1}", "reward.batch_size (line 23): must be >= 0"},
		{"unknown key", "reward: {command: [r], timout: 5s}", "reward.timout (line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := parseSection(t, tc.section, tc.want)
			if c == nil {
				return
			}
			if c.Reward == nil {
				t.Fatal("no reward section")
			}
			timeout, start := c.Reward.Timeouts()
			if c.Reward.Command != nil {
				if timeout != time.Minute || start != 2*time.Minute || c.Reward.Timeout != "60s" || c.Reward.BatchSize != 0 || c.Reward.Eval {
					t.Errorf("defaults: %+v", c.Reward)
				}
			} else if timeout != 5*time.Second || c.Reward.BatchSize != 64 || !c.Reward.Eval || c.Reward.TokenEnv != "REWARD_TOKEN" {
				t.Errorf("values: %+v", c.Reward)
			}
		})
	}
}

func TestRewardExampleConfig(t *testing.T) {
	c, err := Load("../examples/arith-reward.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Reward == nil || len(c.Reward.Command) != 2 || c.Reward.Command[1] != "examples/reward/python/reward.py" || c.Reward.Timeout != "30s" {
		t.Errorf("reward section: %+v", c.Reward)
	}
}
