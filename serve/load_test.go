package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// loadReq is one kind of request of the load test, with the status it
// must get (and, for an error, the field it must name).
type loadReq struct {
	name, method, path, body, ctype string
	status                          int
	param                           string
}

// loadCases are the load test's requests: valid ones (each with a seed,
// checked against its answer alone) and invalid ones.
func loadCases() []loadReq {
	msgs := `"messages":[{"role":"system","content":"Add."},{"role":"user","content":"2+5?"}]`
	ok := func(name, path, body string) loadReq {
		return loadReq{name: name, method: "POST", path: path, body: body, ctype: "application/json", status: 200}
	}
	bad := func(name, path, body string, status int, param string) loadReq {
		return loadReq{name: name, method: "POST", path: path, body: body, ctype: "application/json", status: status, param: param}
	}
	cases := []loadReq{
		ok("text", "/v1/completions", `{"prompt":"1+2=","max_tokens":12,"seed":3,"logprobs":1,"return_token_ids":true}`),
		ok("ids n2 stream", "/v1/completions", `{"prompt":[1,56,49,57,69],"n":2,"max_tokens":16,"seed":4,"temperature":0.7,"top_k":5,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}`),
		ok("chat", "/v1/chat/completions", `{`+msgs+`,"max_tokens":10,"seed":5,"logprobs":true,"top_logprobs":2,"return_token_ids":true}`),
		ok("chat stream", "/v1/chat/completions", `{`+msgs+`,"max_tokens":20,"seed":6,"ignore_eos":true,"stream":true}`),
		ok("unknown fields", "/v1/completions", `{"prompt":"7-3=","max_tokens":8,"seed":7,"frobnicate":{"a":[1,2]},"user":"u","logit_bias":null}`),
		ok("greedy stop", "/v1/completions", `{"prompt":"9+9=","max_tokens":14,"temperature":0,"stop":["\n",";"],"return_token_ids":true}`),
		ok("echo score", "/v1/completions", `{"prompt":"21-4=17","max_tokens":0,"echo":true,"logprobs":0}`),
		{name: "models", method: "GET", path: "/v1/models", status: 200},

		bad("malformed", "/v1/completions", `{"prompt":"1+1=",`, 400, ""),
		bad("not json", "/v1/completions", "\x00\xff{", 400, ""),
		bad("array body", "/v1/chat/completions", `[1,2]`, 400, ""),
		bad("empty body", "/v1/completions", ``, 400, ""),
		bad("huge text prompt", "/v1/completions", `{"prompt":"`+strings.Repeat("1+", 3000)+`"}`, 413, ""),
		bad("huge id prompt", "/v1/completions", `{"prompt":`+jsonOf(slices.Repeat([]int{5}, 3000))+`}`, 413, ""),
		bad("huge chat", "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("x", 8000)+`"}]}`, 413, ""),
		bad("context", "/v1/completions", `{"prompt":`+jsonOf(slices.Repeat([]int{5}, 80))+`}`, 400, "prompt"),
		bad("nesting", "/v1/completions", `{"prompt":`+strings.Repeat("[", 2000)+`}`, 400, ""),
		bad("negative max_tokens", "/v1/completions", `{"prompt":"1","max_tokens":-5}`, 400, "max_tokens"),
		bad("absurd max_tokens", "/v1/completions", `{"prompt":"1","max_tokens":1e400}`, 400, "max_tokens"),
		bad("huge max_tokens", "/v1/chat/completions", `{`+msgs+`,"max_tokens":9223372036854775807}`, 400, "max_tokens"),
		bad("negative temperature", "/v1/completions", `{"prompt":"1","temperature":-3}`, 400, "temperature"),
		bad("string temperature", "/v1/chat/completions", `{`+msgs+`,"temperature":"hot"}`, 400, "temperature"),
		bad("top_p", "/v1/completions", `{"prompt":"1","top_p":7}`, 400, "top_p"),
		bad("negative n", "/v1/completions", `{"prompt":"1","n":-5}`, 400, "n"),
		bad("absurd n", "/v1/chat/completions", `{`+msgs+`,"n":1000000000}`, 400, "n"),
		bad("logprobs", "/v1/completions", `{"prompt":"1","logprobs":99}`, 400, "logprobs"),
		bad("seed", "/v1/completions", `{"prompt":"1","seed":-1.5}`, 400, "seed"),
		bad("seed string", "/v1/completions", `{"prompt":"1","seed":"abc"}`, 400, "seed"),
		bad("stop count", "/v1/completions", `{"prompt":"1","stop":`+jsonOf(slices.Repeat([]string{"x"}, 40))+`}`, 400, "stop"),
		bad("null token", "/v1/completions", `{"prompt":[1,null,5]}`, 400, "prompt"),
		bad("null text", "/v1/completions", `{"prompt":["1+1=",null]}`, 400, "prompt"),
		bad("role type", "/v1/chat/completions", `{"messages":[{"role":5,"content":"x"}]}`, 400, "messages"),
		bad("model", "/v1/completions", `{"prompt":"1","model":"gpt-4o"}`, 404, "model"),
		{name: "xml", method: "POST", path: "/v1/completions", body: `<prompt>1</prompt>`, ctype: "application/xml", status: 415},
		{name: "multipart", method: "POST", path: "/v1/chat/completions", body: "--x\r\n\r\nhi\r\n--x--", ctype: "multipart/form-data; boundary=x", status: 415},
		{name: "form", method: "POST", path: "/v1/chat/completions", body: `messages=hi`, ctype: "application/x-www-form-urlencoded", status: 400},
		{name: "GET completions", method: "GET", path: "/v1/completions", status: 405},
		{name: "no route", method: "POST", path: "/v1/embeddings", body: `{}`, ctype: "application/json", status: 404},
	}
	return cases
}

// canonical is what must not change between a valid request's answer
// alone and under load: each choice's text, finish reason, token ids and
// log-probs (a stream's chunks joined), and a stream's usage.
func canonical(data []byte, stream bool) (string, error) {
	bodies := [][]byte{data}
	if stream {
		bodies = nil
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(nil, 1<<20)
		last := ""
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			ev, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				return "", fmt.Errorf("not an SSE line: %q", line)
			}
			last = ev
			if ev != "[DONE]" {
				bodies = append(bodies, []byte(ev))
			}
		}
		if last != "[DONE]" {
			return "", fmt.Errorf("stream ends with %q, not [DONE]", last)
		}
	}
	type canon struct {
		Text, Finish string
		IDs          []int
		LPs          []*float32
	}
	out := map[int]*canon{}
	var use json.RawMessage
	for _, b := range bodies {
		var r struct {
			Choices []struct {
				Index    int                      `json:"index"`
				Text     string                   `json:"text"`
				Message  struct{ Content string } `json:"message"`
				Delta    struct{ Content string } `json:"delta"`
				Finish   *string                  `json:"finish_reason"`
				TokenIDs []int                    `json:"token_ids"`
				Logprobs *struct {
					TokenLogprobs []*float32 `json:"token_logprobs"`
					Content       []struct {
						Logprob float32 `json:"logprob"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
			Error json.RawMessage `json:"error"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return "", fmt.Errorf("%v in %.200s", err, b)
		}
		if r.Error != nil {
			return "", fmt.Errorf("error event %s", r.Error)
		}
		if r.Data != nil { // /v1/models
			return string(r.Data), nil
		}
		if r.Usage != nil && string(r.Usage) != "null" {
			use = r.Usage
		}
		for _, c := range r.Choices {
			o := out[c.Index]
			if o == nil {
				o = &canon{}
				out[c.Index] = o
			}
			o.Text += c.Text + c.Message.Content + c.Delta.Content
			if c.Finish != nil {
				o.Finish = *c.Finish
			}
			o.IDs = append(o.IDs, c.TokenIDs...)
			if lp := c.Logprobs; lp != nil {
				o.LPs = append(o.LPs, lp.TokenLogprobs...)
				for _, e := range lp.Content {
					o.LPs = append(o.LPs, &e.Logprob)
				}
			}
		}
	}
	list := make([]*canon, len(out))
	for i := range list {
		if list[i] = out[i]; list[i] == nil {
			return "", fmt.Errorf("no choice %d among %d", i, len(out))
		}
	}
	b, err := json.Marshal(struct {
		Choices []*canon
		Usage   json.RawMessage
	}{list, use})
	return string(b), err
}

// send sends one load request and returns its status and body.
func send(ctx context.Context, client *http.Client, base string, r loadReq) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		return 0, nil, err
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// checkError checks that data is an OpenAI error naming param.
func checkError(data []byte, param string) error {
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		return fmt.Errorf("not an OpenAI error: %.200s", data)
	}
	got := ""
	if e.Error.Param != nil {
		got = *e.Error.Param
	}
	if got != param {
		return fmt.Errorf("param %q (%s), want %q", got, e.Error.Message, param)
	}
	return nil
}

// rawFault opens a TCP connection to addr and leaves abruptly: mid-header,
// mid-body, mid-stream, or after garbage; or stalls mid-body until the
// server gives up on it.
func rawFault(addr string, kind int) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second)) //nolint:errcheck // a fresh TCP connection
	switch kind {
	case 0: // mid-header
		_, err = io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
	case 1: // mid-body: 3000 bytes announced, 30 sent
		_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n{\"messages\":[{\"role\":\"user\"")
	case 2: // mid-stream: leave after the first chunk, while 4 long choices still decode
		body := `{"prompt":"1+1=","n":4,"max_tokens":50,"ignore_eos":true,"stream":true,"seed":1}`
		if _, err = fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return err
		}
		br := bufio.NewReader(conn)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("mid-stream: %v before the first chunk", err)
			}
			if strings.HasPrefix(line, "data: ") {
				return nil
			}
			if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
				return fmt.Errorf("mid-stream: %q", line)
			}
		}
	case 4: // stalled mid-body: the server answers 408 after its body timeout
		if _, err = io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"prompt\":"); err != nil {
			return err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 408") {
			return fmt.Errorf("stalled body: %q %v, want a 408", line, err)
		}
	case 3: // not HTTP: the server answers 400 and closes
		if _, err = io.WriteString(conn, "HELLO\x00\x01\r\n\r\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 400") {
			return fmt.Errorf("garbage: %q %v, want a 400", line, err)
		}
	}
	return err
}

// health reads /health's counts.
func health(t *testing.T, client *http.Client, base string) (inFlight, live, queued int) {
	t.Helper()
	status, data, err := send(context.Background(), client, base, loadReq{method: "GET", path: "/health"})
	var h struct {
		InFlight int `json:"requests_in_flight"`
		Live     int `json:"sequences_live"`
		Queued   int `json:"requests_queued"`
	}
	if err != nil || status != 200 || json.Unmarshal(data, &h) != nil {
		t.Fatalf("/health: %d %s %v", status, data, err)
	}
	return h.InFlight, h.Live, h.Queued
}

// Many concurrent clients mixing valid requests with malformed JSON, bodies
// over the bound, absurd parameters, unknown fields, wrong content types,
// cancelled requests, raw TCP connections that leave mid-header, mid-body
// or mid-stream and ones that stall mid-body: the server stays up, answers every valid request
// as it answers it alone and every invalid one with its 4xx, and after
// each round holds nothing: goroutines back to their number before, no
// request in flight, live or queued, and no heap growth from one round to
// the next. HACRL_SERVE_LOAD=N runs N times the requests (the short
// version always runs).
func TestLoadAndFaults(t *testing.T) {
	var logMu sync.Mutex
	var logs []string
	f := newFixture(t, func(c *Config) {
		c.MaxBodyBytes, c.MaxN, c.MaxConcurrent, c.bodyTimeout = 4096, 4, 256, 200*time.Millisecond
		c.Logf = func(format string, args ...any) {
			logMu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			logMu.Unlock()
		}
	})
	f.serveLoopback()
	addr := strings.TrimPrefix(f.url, "http://")
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	defer transport.CloseIdleConnections()

	scale := 1
	if v := os.Getenv("HACRL_SERVE_LOAD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HACRL_SERVE_LOAD=%q: want a positive integer", v)
		}
		scale = n
	}
	const workers, perWorker = 12, 14
	cases := loadCases()
	const faults = 6 // kinds beyond the cases: 5 raw TCP ones and a cancelled request

	// Each valid request's answer alone.
	want := map[int]string{}
	for i, c := range cases {
		if c.status != 200 {
			continue
		}
		status, data, err := send(context.Background(), client, f.url, c)
		if err != nil || status != 200 {
			t.Fatalf("%s alone: %d %s %v", c.name, status, data, err)
		}
		if want[i], err = canonical(data, strings.Contains(c.body, `"stream":true`)); err != nil {
			t.Fatalf("%s alone: %v", c.name, err)
		}
	}

	var ok, refused, faulted sync.Map // name → count, to check the mix ran
	count := func(m *sync.Map, name string) {
		v, _ := m.LoadOrStore(name, new(int64))
		p := v.(*int64)
		logMu.Lock()
		*p++
		logMu.Unlock()
	}
	round := func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for k := range perWorker * scale {
					i := (w*5 + k*7) % (len(cases) + faults)
					if i >= len(cases) {
						kind := i - len(cases)
						if kind == 5 { // a request cancelled while it decodes
							ctx, cancel := context.WithTimeout(context.Background(), time.Duration(k%4+1)*time.Millisecond)
							send(ctx, client, f.url, cases[0]) //nolint:errcheck // cancelled on purpose
							cancel()
						} else if err := rawFault(addr, kind); err != nil {
							t.Errorf("fault %d: %v", kind, err)
						}
						count(&faulted, strconv.Itoa(kind))
						continue
					}
					c := cases[i]
					status, data, err := send(context.Background(), client, f.url, c)
					switch {
					case err != nil:
						t.Errorf("%s: %v", c.name, err)
					case status != c.status:
						t.Errorf("%s: %d %.300s, want %d", c.name, status, data, c.status)
					case status == 200:
						got, err := canonical(data, strings.Contains(c.body, `"stream":true`))
						if err != nil || got != want[i] {
							t.Errorf("%s under load: %s %v\nalone: %s", c.name, got, err, want[i])
						}
						count(&ok, c.name)
					default:
						if err := checkError(data, c.param); err != nil {
							t.Errorf("%s: %d: %v", c.name, status, err)
						}
						count(&refused, c.name)
					}
				}
			})
		}
		wg.Wait()
	}
	// settle waits until the server holds nothing and the goroutines are
	// back to baseline, and returns the heap in use.
	settle := func(baseline int, what string) uint64 {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		fail := func(format string, args ...any) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: "+format+"\n%s", append(append([]any{what}, args...), buf[:runtime.Stack(buf, true)])...)
		}
		for { // the server holds no request or sequence
			inFlight, live, queued := health(t, client, f.url)
			if inFlight == 0 && live == 0 && queued == 0 {
				break
			}
			if time.Now().After(deadline) {
				fail("%d in flight, %d live, %d queued", inFlight, live, queued)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Then, with no request of the test's own open (each health probe
		// opens a connection whose goroutines take a moment to end), the
		// goroutines come back to baseline.
		transport.CloseIdleConnections()
		for n := runtime.NumGoroutine(); n > baseline; n = runtime.NumGoroutine() {
			if time.Now().After(deadline) {
				fail("%d goroutines, %d before", n, baseline)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}

	transport.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond) // the server's side of the closed connections ends
	baseline := runtime.NumGoroutine()
	start := time.Now()
	round()
	heap1 := settle(baseline, "after round 1")
	round()
	heap2 := settle(baseline, "after round 2")
	t.Logf("%d requests a round, %v for both; heap %d KiB after round 1, %d KiB after round 2", workers*perWorker*scale, time.Since(start).Round(time.Millisecond), heap1>>10, heap2>>10)
	if heap2 > heap1+2<<20 {
		t.Errorf("the heap grew from %d KiB after round 1 to %d KiB after the same round again", heap1>>10, heap2>>10)
	}

	// Every kind ran, and nothing went wrong inside the server.
	for i, c := range cases {
		m := &refused
		if c.status == 200 {
			m = &ok
		}
		if _, ran := m.Load(c.name); !ran {
			t.Errorf("case %d %s never ran", i, c.name)
		}
	}
	for kind := range faults {
		if _, ran := faulted.Load(strconv.Itoa(kind)); !ran {
			t.Errorf("fault %d never ran", kind)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, "panic") || strings.Contains(l, "failed") {
			t.Errorf("server log: %s", l)
		}
	}
	if st := f.srv.Stats(); st.Cancelled == 0 || st.SharedSteps == 0 {
		t.Errorf("stats %+v: want cancelled sequences (clients that left) and shared steps", st)
	}
}

// smallBuffers accepts connections with a small send buffer, so that a
// client that stops reading blocks the server's writes soon.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096) //nolint:errcheck // a smaller buffer only makes the test quicker
	}
	return c, err
}

// A client that stops reading a stream without closing its connection
// loses the request once a write has blocked for the send timeout: its
// slot and its sequences are freed, and the server answers others.
func TestStalledReaderFreesSlot(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.sendTimeout = 300 * time.Millisecond; c.MaxConcurrent = 1 })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.serveOn(smallBuffers{l})
	addr := l.Addr().String()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Four choices with 20 top log-probs a token: far more than the buffers hold.
	body := `{"prompt":"1+1=","n":4,"max_tokens":55,"ignore_eos":true,"logprobs":20,"stream":true,"seed":1}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := f.srv.Stats()
		if st.InFlight == 0 && st.Live == 0 && st.Steps > 0 {
			break
		}
		if time.Now().After(deadline) {
			conn.SetReadDeadline(time.Now().Add(time.Second)) //nolint:errcheck // for the message
			line, _ := bufio.NewReader(conn).ReadString('\n')
			t.Fatalf("a client that stopped reading still holds the server: %+v (it answered %q)", st, line)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var c completion
	f.post("/v1/completions", map[string]any{"prompt": "1+1=", "max_tokens": 3}, &c)
}

// The body timeout bounds the body's arrival only: an answer that takes
// longer, streamed or not, is not cut by it.
func TestBodyTimeoutSparesSlowAnswers(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.bodyTimeout = 50 * time.Millisecond
		c.hooks = func(s *scheduler) { s.beforeStep = func() { time.Sleep(10 * time.Millisecond) } }
	})
	f.serveLoopback()
	for _, stream := range []bool{false, true} {
		r := loadReq{method: "POST", path: "/v1/completions", ctype: "application/json",
			body: fmt.Sprintf(`{"prompt":"1+1=","max_tokens":30,"ignore_eos":true,"seed":2,"return_token_ids":true,"stream":%v}`, stream)}
		start := time.Now()
		status, data, err := send(context.Background(), http.DefaultClient, f.url, r)
		if err != nil || status != 200 {
			t.Fatalf("stream %v: %d %s %v", stream, status, data, err)
		}
		got, err := canonical(data, stream)
		if err != nil || !strings.Contains(got, `"Finish":"length"`) || time.Since(start) < 200*time.Millisecond {
			t.Errorf("stream %v after %v: %s %v; want all 30 tokens, over 200 ms", stream, time.Since(start), got, err)
		}
	}
}
