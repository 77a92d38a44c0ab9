package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// How hacrl serve stops on an interrupt, through the real binary and a
// real SIGINT on the shipped llama-bpe agent: at once when idle (a
// connection that has not sent a request yet included), after the
// requests in flight when there are some, cutting them cleanly at
// --shutdown-timeout; exit status 130 and its own words on stderr.
func TestServeStop(t *testing.T) {
	agent := repoPath(t, "examples/agents/llama-bpe")
	// One row and 256 choices of 60 tokens: a request decodes 15360
	// steps (about 0.7 s), long enough to be in flight when the interrupt
	// comes.
	long := `{"prompt":"12+7","max_tokens":60,"n":%d,"ignore_eos":true,"seed":7%s}`
	start := func(t *testing.T, args ...string) (*liveRun, string) {
		t.Helper()
		addr := freeAddr(t)
		l := startLive(t, nil, append([]string{"serve", agent, "--addr", addr, "--max-batch", "1", "--max-n", "1024"}, args...)...)
		l.waitFor(t, 30*time.Second, "the server", func(out string) bool { return strings.Contains(out, "serving llama-bpe") })
		return l, "http://" + addr
	}
	stopped := func(t *testing.T, l *liveRun, within time.Duration) string {
		t.Helper()
		err := l.wait(t, within)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("exit: %v, want status 130\n%s", err, l.String())
		}
		out := l.String()
		if !strings.Contains(out, "interrupt: stopping the server: no new requests; those in flight get up to") {
			t.Errorf("stderr does not say what the interrupt does:\n%s", out)
		}
		return out
	}

	t.Run("idle", func(t *testing.T) {
		l, url := start(t)
		// A client's pre-opened connection that has sent nothing yet.
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		time.Sleep(50 * time.Millisecond)
		t0 := time.Now()
		l.cmd.Process.Signal(syscall.SIGINT)
		out := stopped(t, l, 10*time.Second)
		if d := time.Since(t0); d > time.Second {
			t.Errorf("an idle server took %v to stop, want well under a second", d)
		}
		if !strings.HasSuffix(out, "stopped\n") {
			t.Errorf("stderr does not end with \"stopped\":\n%s", out)
		}
	})

	t.Run("in flight finishes", func(t *testing.T) {
		l, url := start(t)
		want := completionTexts(t, url, fmt.Sprintf(long, 256, ""))
		s := openStream(t, url, fmt.Sprintf(long, 256, `,"stream":true`))
		s.next(t) // decoding has begun
		l.cmd.Process.Signal(syscall.SIGINT)
		l.waitFor(t, 10*time.Second, "the interrupt", func(out string) bool { return strings.Contains(out, "interrupt:") })
		got, errEvent, done := s.rest(t)
		if errEvent != "" || !done {
			t.Fatalf("the stream in flight ended with error %q, [DONE] %v", errEvent, done)
		}
		if len(got) != len(want) {
			t.Fatalf("%d choices streamed, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("choice %d: streamed across the interrupt %q, uninterrupted %q", i, got[i], want[i])
			}
		}
		stopped(t, l, 10*time.Second)
	})

	t.Run("cut at the bound", func(t *testing.T) {
		l, url := start(t, "--shutdown-timeout", "200ms")
		// b, a stream, decodes its 1024 choices one at a time (about
		// 3 s); a waits behind them.
		b := openStream(t, url, fmt.Sprintf(long, 1024, `,"stream":true`))
		b.next(t) // the stream has begun
		type reply struct {
			status int
			body   string
		}
		ac := make(chan reply, 1)
		go func() {
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(long, 1, "")))
			if err != nil {
				ac <- reply{0, err.Error()}
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ac <- reply{resp.StatusCode, string(data)}
		}()
		l.waitFor(t, 10*time.Second, "the second request", func(string) bool { return inFlight(url) == 2 })
		t0 := time.Now()
		l.cmd.Process.Signal(syscall.SIGINT)
		if a := <-ac; a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, `"message":"the server is shutting down"`) {
			t.Errorf("a request cut at the bound: %d %.200s; want 503 and the shutdown error", a.status, a.body)
		}
		_, errEvent, done := b.rest(t)
		if !strings.Contains(errEvent, "the server is shutting down") || !done {
			t.Errorf("a stream cut at the bound ended with error %q, [DONE] %v; want the shutdown error and [DONE]", errEvent, done)
		}
		out := stopped(t, l, 10*time.Second)
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("stopping with a 200ms bound took %v", d)
		}
		if !strings.Contains(out, "stopped (2 requests still running after --shutdown-timeout 200ms were cut)") {
			t.Errorf("stderr does not say what was cut:\n%s", out)
		}
	})
}

// inFlight is /health's requests_in_flight, -1 when it does not answer.
func inFlight(url string) int {
	resp, err := http.Get(url + "/health")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var h struct {
		N int `json:"requests_in_flight"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return -1
	}
	return h.N
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// completionTexts posts a completion request and returns its choices' texts.
func completionTexts(t *testing.T, url, body string) []string {
	t.Helper()
	var res struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
	}
	postJSON(t, url+"/v1/completions", body, &res)
	texts := make([]string, len(res.Choices))
	for _, c := range res.Choices {
		texts[c.Index] = c.Text
	}
	return texts
}

// stream is a streamed completion being read.
type stream struct {
	body  io.Closer
	r     *bufio.Reader
	texts map[int]string
}

func openStream(t *testing.T, url, body string) *stream {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, data)
	}
	return &stream{body: resp.Body, r: bufio.NewReader(resp.Body), texts: map[int]string{}}
}

// next reads one event: its data, or "" at the end of the body.
func (s *stream) next(t *testing.T) string {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err == io.EOF && line == "" {
			return ""
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			if data != "[DONE]" {
				var ev struct {
					Choices []struct {
						Index int    `json:"index"`
						Text  string `json:"text"`
					} `json:"choices"`
				}
				if json.Unmarshal([]byte(data), &ev) == nil {
					for _, c := range ev.Choices {
						s.texts[c.Index] += c.Text
					}
				}
			}
			return data
		}
	}
}

// rest reads the stream to its end: the choices' texts, the message of an
// error event if one came, and whether [DONE] ended it.
func (s *stream) rest(t *testing.T) (texts map[int]string, errEvent string, done bool) {
	t.Helper()
	for {
		data := s.next(t)
		switch {
		case data == "":
			return s.texts, errEvent, done
		case data == "[DONE]":
			done = true
		case strings.HasPrefix(data, `{"error"`):
			errEvent = data
		}
	}
}
