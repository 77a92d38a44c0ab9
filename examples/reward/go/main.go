// Command reward is an external reward for hacrl's arith task, in Go with
// the standard library only; it scores exactly as examples/reward/python/reward.py.
//
// As a command (reward: {command: [./reward]}) it reads one JSON request per
// line on stdin and writes one JSON answer per line on stdout. With
// -http 127.0.0.1:8000 it serves the same protocol over HTTP instead (reward:
// {url: http://127.0.0.1:8000/reward}), on a loopback address only. The
// protocol is in docs/reward.md:
//
//	request  {"version": 1, "purpose": "train", "step": 3, "items": [
//	           {"id": 0, "problem_id": "arith/train/12", "agent": "gpt-char",
//	            "prompt": "47+38", "response": "…\n#### 85", "reference": "85",
//	            "tokens": 31, "truncated": false}, …]}
//	answer   {"rewards": [{"id": 0, "reward": 1, "correct": true}, …]}
//
// The reward: 1 for the right final answer (after the last "####", on its
// line); 0.5 for the right answer in a response that ran on to the token
// limit; 0.1 for a wrong integer answer; 0 for no integer answer.
//
//	go build -o /tmp/reward ./examples/reward/go
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
)

// Item is one response to score.
type Item struct {
	ID        int     `json:"id"`
	ProblemID string  `json:"problem_id"`
	Agent     string  `json:"agent"`
	Prompt    string  `json:"prompt"`
	Response  string  `json:"response"`
	Reference *string `json:"reference"`
	Tokens    int     `json:"tokens"`
	Truncated bool    `json:"truncated"`
}

// Request is one batch of items.
type Request struct {
	Version int    `json:"version"`
	Purpose string `json:"purpose"`
	Step    int    `json:"step"`
	Items   []Item `json:"items"`
}

// Reward is the judgement of one item.
type Reward struct {
	ID      int     `json:"id"`
	Reward  float64 `json:"reward"`
	Correct bool    `json:"correct"`
}

// Answer answers a Request.
type Answer struct {
	Rewards []Reward `json:"rewards"`
}

var integer = regexp.MustCompile(`^-?[0-9]+$`)

// finalAnswer is the text after the last "####", up to the end of its line,
// trimmed; ok is false without a "####".
func finalAnswer(response string) (answer string, ok bool) {
	i := strings.LastIndex(response, "####")
	if i < 0 {
		return "", false
	}
	rest, _, _ := strings.Cut(response[i+4:], "\n")
	return strings.TrimSpace(rest), true
}

// parseInt reads s as a whole decimal integer.
func parseInt(s string) (*big.Int, bool) {
	if !integer.MatchString(s) {
		return nil, false
	}
	return new(big.Int).SetString(s, 10)
}

// score is the reward and correctness of one item.
func score(it Item) (float64, bool) {
	ans, ok := finalAnswer(it.Response)
	if !ok {
		return 0, false
	}
	got, ok := parseInt(ans)
	if !ok || it.Reference == nil {
		return 0, false
	}
	want, ok := parseInt(strings.TrimSpace(*it.Reference))
	if !ok {
		return 0, false
	}
	switch {
	case got.Cmp(want) != 0:
		return 0.1, false
	case it.Truncated:
		return 0.5, true
	}
	return 1, true
}

// answer scores every item of req.
func answer(req Request) (Answer, error) {
	if req.Version != 1 {
		return Answer{}, fmt.Errorf("unknown protocol version %d", req.Version)
	}
	a := Answer{Rewards: make([]Reward, 0, len(req.Items))}
	for _, it := range req.Items {
		r, c := score(it)
		a.Rewards = append(a.Rewards, Reward{ID: it.ID, Reward: r, Correct: c})
	}
	return a, nil
}

// serveLines answers one request line at a time, flushing every answer.
func serveLines(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		a, err := answer(req)
		if err != nil {
			return err
		}
		if err := enc.Encode(a); err != nil { // Encode ends the line
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// serveHTTP answers POST /reward on addr, a loopback address.
func serveHTTP(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-http %s: listen on a loopback address (127.0.0.1:PORT)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// The actual address (with -http 127.0.0.1:0, the port the system chose).
	log.Printf("listening on http://%s/reward", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /reward", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		a, err := answer(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a)
	})
	return http.Serve(ln, mux)
}

func main() {
	addr := flag.String("http", "", "serve HTTP on this loopback address (e.g. 127.0.0.1:8000) instead of stdin/stdout")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("reward: ") // log writes to stderr, which hacrl passes on
	var err error
	if *addr != "" {
		err = serveHTTP(*addr)
	} else {
		err = serveLines(os.Stdin, os.Stdout)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
