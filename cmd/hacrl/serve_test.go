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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/model"
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

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("HACRL_API_KEY", "k3y")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- execute(ctx, []string{"serve", agent, "--addr", addr, "--name", "arith", "--max-batch", "4"}, strings.NewReader(""), io.Discard, &errOut)
	}()
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url+"/health", nil)
		req.Header.Set("Authorization", "Bearer k3y")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/health: %d", resp.StatusCode)
			}
			break
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
	cancel()
	select {
	case c := <-done:
		if c != 0 && c != 130 {
			t.Errorf("hacrl serve exited %d after the interrupt: %s", c, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hacrl serve did not stop")
	}
	if !strings.Contains(errOut.String(), "serving arith") {
		t.Errorf("stderr: %q", errOut.String())
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
