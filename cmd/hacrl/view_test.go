package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/view"
)

// hacrl view through the real binary on a real run: it prints the address
// with the key, answers /api/runs with the key and refuses it without,
// and stops on SIGINT with status 0.
func TestViewCommand(t *testing.T) {
	out := logRun(t)
	addr := freeAddr(t)
	const key = "view-test-key"
	l := startLive(t, nil, "view", out, "--addr", addr, "--key", key)
	url := "http://" + addr + "/?key=" + key
	l.waitFor(t, 30*time.Second, "the address", func(s string) bool { return strings.Contains(s, url+"\n") })

	get := func(auth string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/runs", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if status, body := get(""); status != http.StatusUnauthorized {
		t.Errorf("/api/runs without the key: %d %s", status, body)
	}
	status, body := get("Bearer " + key)
	var runs struct {
		Runs []struct {
			ID, Dir, Name, Method string
			Agents                []string
			Steps                 int
			LastStep              int `json:"last_step"`
			Done                  bool
		}
	}
	if err := json.Unmarshal(body, &runs); status != http.StatusOK || err != nil || len(runs.Runs) != 1 {
		t.Fatalf("/api/runs: %d %v %s", status, err, body)
	}
	r := runs.Runs[0]
	if r.ID != "0" || r.Dir != out || r.Name != "run" || r.Method != "hacpo" || !reflect.DeepEqual(r.Agents, []string{"gpt-char", "llama-bpe"}) || r.Steps != 2 || r.LastStep != 2 || !r.Done {
		t.Errorf("/api/runs: %+v", r)
	}

	t0 := time.Now()
	l.cmd.Process.Signal(syscall.SIGINT)
	if err := l.wait(t, 10*time.Second); err != nil {
		t.Errorf("exit after SIGINT: %v, want status 0\n%s", err, l.String())
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if s := l.String(); !strings.Contains(s, "interrupt: stopping the view") || !strings.HasSuffix(s, "stopped\n") {
		t.Errorf("output:\n%s", s)
	}
}

// safeBuffer is a bytes.Buffer that a command writes while the test reads.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestViewCommandErrors(t *testing.T) {
	out := logRun(t)
	t.Setenv(view.KeyEnv, "")
	dir := t.TempDir()
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"view"}, 2, "requires at least 1 arg(s)"},
		{[]string{"view", filepath.Join(dir, "gone")}, 1, "view: run directory: stat " + filepath.Join(dir, "gone") + ": no such file or directory"},
		{[]string{"view", dir}, 1, dir + " is not a run directory: it has no metrics.jsonl"},
		{[]string{"view", out, "--addr", "0.0.0.0:0"}, 2, "--addr 0.0.0.0:0 is not loopback: view: address 0.0.0.0:0 has host \"0.0.0.0\": a key is required to serve on an address that is not loopback (--key KEY or $HACRL_VIEW_KEY)"},
		{[]string{"view", out, "--addr", ":0"}, 2, "no host (every interface)"},
		{[]string{"view", out, "--addr", "localhost"}, 2, "--addr: view: address \"localhost\": want host:port"},
		{[]string{"view", out, "--key", "two words"}, 1, "the key has ' ' at byte 3"},
	} {
		var stdout, stderr bytes.Buffer
		status := execute(context.Background(), c.args, nil, &stdout, &stderr)
		if status != c.status || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("hacrl %s: status %d, want %d; stderr %q, want it to contain %q", strings.Join(c.args, " "), status, c.status, stderr.String(), c.want)
		}
	}

	// The key from the environment; the address printed with it; a
	// cancelled context (what an interrupt does) ends the command with 0.
	t.Setenv(view.KeyEnv, "from-env/+")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr safeBuffer
	done := make(chan int)
	go func() {
		done <- execute(ctx, []string{"view", out, out, "--addr", "127.0.0.1:0"}, nil, &stdout, &stderr)
	}()
	printed := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)/\?key=from-env%2F%2B\n$`)
	deadline := time.Now().Add(10 * time.Second)
	for !printed.MatchString(stdout.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	port := printed.FindStringSubmatch(stdout.String())[1]
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/api/runs", nil)
	req.Header.Set("Authorization", "Bearer from-env/+")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `"dir":`) != 2 {
		t.Errorf("/api/runs with the key from the environment: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case status := <-done:
		if status != 0 {
			t.Errorf("status %d after the interrupt, want 0; stderr %q", status, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still serving 10 s after the interrupt")
	}
}
