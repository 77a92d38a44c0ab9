package reward

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func ref(s string) *string { return &s }

// exampleCases are responses to arith problems with what both worked
// examples (examples/reward/python, examples/reward/go) must answer.
var exampleCases = []struct {
	item    Item
	reward  float64
	correct bool
}{
	{Item{ProblemID: "arith/train/0", Agent: "a", Prompt: "47+38", Response: "7+8=15;4+3+1=8;=85\n#### 85", Reference: ref("85"), Tokens: 25}, 1, true},
	{Item{ProblemID: "arith/train/1", Agent: "a", Prompt: "52-38", Response: "#### 014", Reference: ref("14"), Tokens: 9}, 1, true},
	{Item{ProblemID: "arith/train/2", Agent: "b", Prompt: "5-5", Response: "#### -0\nmore text running on", Reference: ref("0"), Tokens: 40, Truncated: true}, 0.5, true},
	{Item{ProblemID: "arith/train/3", Agent: "b", Prompt: "47+38", Response: "#### 84", Reference: ref("85"), Tokens: 8}, 0.1, false},
	{Item{ProblemID: "arith/train/4", Agent: "a", Prompt: "47+38", Response: "#### eighty-five", Reference: ref("85"), Tokens: 17}, 0, false},
	{Item{ProblemID: "arith/train/5", Agent: "a", Prompt: "47+38", Response: "85", Reference: ref("85"), Tokens: 3}, 0, false},
	{Item{ProblemID: "arith/train/6", Agent: "a", Prompt: "47+38", Response: "#### 85", Reference: nil, Tokens: 8}, 0, false},
	{Item{ProblemID: "arith/train/7", Agent: "a", Prompt: "9*9", Response: "#### 81 \r\n#### 80\n", Reference: ref("81"), Tokens: 17}, 0.1, false},
	{Item{ProblemID: "arith/train/8", Agent: "a", Prompt: "1+1", Response: "« ünïcödé » #### 2", Reference: ref("2"), Tokens: 20}, 1, true},
}

func exampleItems() []Item {
	items := make([]Item, len(exampleCases))
	for i, c := range exampleCases {
		items[i] = c.item
	}
	return items
}

// checkExample scores exampleCases through c, in batches of 4, and checks
// every result, the number of requests and a clean stop.
func checkExample(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 2; step++ { // the same process answers again
		res, err := c.Score(ctx, PurposeTrain, step, exampleItems())
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(exampleCases) {
			t.Fatalf("%d results for %d items", len(res), len(exampleCases))
		}
		for i, tc := range exampleCases {
			if res[i].Reward != tc.reward || res[i].Correct != tc.correct {
				t.Errorf("step %d: %q (reference %v): got %+v, want reward %v correct %v", step, tc.item.Response, tc.item.Reference, res[i], tc.reward, tc.correct)
			}
		}
	}
	if got, want := c.Calls(), 2*3; got != want { // 9 items in batches of 4
		t.Errorf("Calls() = %d, want %d", got, want)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// python is the path of the python3 interpreter itself (not a wrapper such
// as a pyenv shim, which can take a second to start).
func python(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		pythonPath, pythonErr = strings.TrimSpace(string(out)), err
	})
	if pythonErr != nil || pythonPath == "" {
		t.Fatalf("python3, which runs the Python example reward, does not run: %v", pythonErr)
	}
	return pythonPath
}

// logSink collects a command's stderr lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) log(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *logSink) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func TestPythonExample(t *testing.T) {
	var logs logSink
	c, err := New(Options{Command: []string{python(t), "../examples/reward/python/reward.py"}, Timeout: 20 * time.Second, BatchSize: 4, Log: logs.log})
	if err != nil {
		t.Fatal(err)
	}
	checkExample(t, c)
	if !slices.Contains(logs.all(), "reward.py: ready") {
		t.Errorf("the command's stderr was not passed on: %q", logs.all())
	}
}

// buildGoExample builds examples/reward/go and returns the binary's path.
func buildGoExample(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "reward")
	out, err := exec.Command(gobin, "build", "-o", bin, "../examples/reward/go").CombinedOutput()
	if err != nil {
		t.Fatalf("building examples/reward/go: %v\n%s", err, out)
	}
	return bin
}

func TestGoExample(t *testing.T) {
	bin := buildGoExample(t)
	t.Run("command", func(t *testing.T) {
		c, err := New(Options{Command: []string{bin}, Timeout: 20 * time.Second, BatchSize: 4, Log: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		checkExample(t, c)
	})
	t.Run("http", func(t *testing.T) {
		srv := exec.Command(bin, "-http", "127.0.0.1:0")
		stderr, err := srv.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			srv.Process.Kill()
			srv.Wait()
		}()
		addr := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			re := regexp.MustCompile(`listening on (http://\S+)`)
			for sc.Scan() {
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					addr <- m[1]
				}
			}
		}()
		var url string
		select {
		case url = <-addr:
		case <-time.After(10 * time.Second):
			t.Fatal("the Go example did not say where it listens")
		}
		c, err := New(Options{URL: url, Timeout: 20 * time.Second, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		checkExample(t, c)
	})
	t.Run("refuses a non-loopback address", func(t *testing.T) {
		out, err := exec.Command(bin, "-http", "0.0.0.0:0").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "loopback") {
			t.Errorf("-http 0.0.0.0:0: %v, %s", err, out)
		}
	})
}

// misbehaving returns a started client of testdata/misbehave.py in mode.
func misbehaving(t *testing.T, mode string, timeout time.Duration) (*Client, *logSink, error) {
	t.Helper()
	logs := &logSink{}
	c, err := New(Options{Command: []string{python(t), "testdata/misbehave.py", mode}, Timeout: timeout, StartTimeout: 20 * time.Second, Log: logs.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, logs, c.Start(context.Background())
}

func TestCommandFailures(t *testing.T) {
	items := exampleItems()[:3]
	tests := []struct {
		mode string
		want []string // all in the error
	}{
		{"crash", []string{"exited (exit status 3)", "misbehave: something broke on item 0"}},
		{"garbage", []string{"not JSON", `"this is not json"`}},
		{"nan", []string{"finite numbers", "NaN"}},
		{"range", []string{"rewards[0] (id 0): reward 1.5 is outside [0, 1]"}},
		{"negative", []string{"(id 2): reward -0.25 is outside [0, 1]"}},
		{"unknown", []string{"unknown id 102 (the request's ids are 0–2)"}},
		{"duplicate", []string{"id 0 answered twice"}},
		{"missing", []string{"no reward for 1 of 3 ids (2)"}},
		{"no-reward", []string{`rewards[0] (id 0) has no "reward"`}},
		{"no-list", []string{`no "rewards" list`}},
		{"string-reward", []string{"not JSON", "string"}},
		{"stdout-close", []string{"closed its stdout without answering and was killed"}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			c, _, err := misbehaving(t, tc.mode, 20*time.Second)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			_, err = c.Score(context.Background(), PurposeTrain, 4, items)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tc.want, "reward command [", "misbehave.py "+tc.mode+"]", "train request of step 4 (ids 0–2)") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// The client is unusable afterwards and says why, and the
			// process has been stopped.
			if _, err2 := c.Score(context.Background(), PurposeTrain, 5, items); err2 == nil || !strings.Contains(err2.Error(), tc.want[0]) {
				t.Errorf("second request: %v", err2)
			}
			p := c.t.(*process)
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				t.Error("the process is still running")
			}
		})
	}
}

func TestCommandHangs(t *testing.T) {
	t0 := time.Now()
	c, logs, err := misbehaving(t, "hang", 500*time.Millisecond)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	_, err = c.Score(context.Background(), PurposeTrain, 1, exampleItems())
	if err == nil || !strings.Contains(err.Error(), "no answer within 500ms (reward.timeout); the process was killed") {
		t.Fatalf("error: %v", err)
	}
	select {
	case <-c.t.(*process).exited:
	case <-time.After(5 * time.Second):
		t.Error("the hanging process was not killed")
	}
	if d := time.Since(t0); d > 8*time.Second {
		t.Errorf("took %v", d)
	}
	_ = logs
}

func TestCommandFailsToStart(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		timeout time.Duration
		want    []string
	}{
		{"no such program", []string{"hacrl-no-such-reward-program", "x"}, time.Second,
			[]string{"reward command [hacrl-no-such-reward-program x]: cannot start", "not found"}},
		{"exits at once", []string{python(t), "testdata/misbehave.py", "exit-at-start"}, 20 * time.Second,
			[]string{"the first (empty) request", "exited (exit status 2)", "misbehave: cannot load my model"}},
		{"hangs at start", []string{python(t), "testdata/misbehave.py", "hang-start"}, 300 * time.Millisecond,
			[]string{"the first (empty) request", "no answer within 300ms (reward.start_timeout)"}},
		{"not a program", []string{"./testdata"}, time.Second, []string{"cannot start"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Options{Command: tc.argv, Timeout: time.Hour, StartTimeout: tc.timeout, Log: func(string) {}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Start(context.Background())
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCommandExtraLine(t *testing.T) {
	c, _, err := misbehaving(t, "extra-line", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let the unasked-for line arrive
	_, err = c.Score(context.Background(), PurposeTrain, 1, exampleItems()[:2])
	// Seen before the request goes out, it is named as such; should a very
	// slow reader deliver it only afterwards, it is taken for the answer
	// and fails as one (it has no rewards for the request's ids).
	if err == nil || !strings.Contains(err.Error(), "answers no request") && !strings.Contains(err.Error(), "no reward for 2 of 2 ids") {
		t.Fatalf("error: %v", err)
	}
}

// handler answers requests with answer(req), recording what it saw.
type handler struct {
	mu       sync.Mutex
	requests []Request
	auth     []string
	answer   func(w http.ResponseWriter, r *http.Request, req Request)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req Request
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.mu.Unlock()
	h.answer(w, r, req)
}

// lengthReward answers every item with reward len(response)/100, in
// reverse order.
func lengthReward(w http.ResponseWriter, _ *http.Request, req Request) {
	var rs []string
	for i := len(req.Items) - 1; i >= 0; i-- {
		it := req.Items[i]
		rs = append(rs, fmt.Sprintf(`{"id": %d, "reward": %g}`, it.ID, float64(len(it.Response))/100))
	}
	fmt.Fprintf(w, `{"rewards": [%s]}`, strings.Join(rs, ", "))
}

func TestHTTP(t *testing.T) {
	h := &handler{answer: lengthReward}
	srv := httptest.NewServer(h)
	defer srv.Close()
	t.Setenv("HACRL_TEST_REWARD_TOKEN", "s3cret")
	c, err := New(Options{URL: srv.URL + "/reward", TokenEnv: "HACRL_TEST_REWARD_TOKEN", Timeout: 5 * time.Second, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	items := exampleItems()
	res, err := c.Score(context.Background(), PurposeEval, 7, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		want := float64(len(it.Response)) / 100
		if res[i].Reward != want || res[i].Correct != (want >= 1) {
			t.Errorf("item %d: %+v, want reward %v", i, res[i], want)
		}
	}
	if len(h.requests) != 4 { // the empty first request, then 4 + 4 + 1 items
		t.Fatalf("%d requests", len(h.requests))
	}
	if r := h.requests[0]; r.Purpose != PurposeStart || len(r.Items) != 0 || r.Version != Version {
		t.Errorf("first request %+v", r)
	}
	for k, r := range h.requests[1:] {
		if r.Purpose != PurposeEval || r.Step != 7 || r.Version != Version || len(r.Items) != []int{4, 4, 1}[k] {
			t.Errorf("request %d: purpose %q step %d version %d, %d items", k+1, r.Purpose, r.Step, r.Version, len(r.Items))
		}
		for i, it := range r.Items {
			want := items[4*k+i]
			want.ID = 4*k + i
			if !equalItems(it, want) {
				t.Errorf("request %d item %d: %+v, want %+v", k+1, i, it, want)
			}
		}
	}
	for _, a := range h.auth {
		if a != "Bearer s3cret" {
			t.Errorf("Authorization %q", a)
		}
	}
}

func equalItems(a, b Item) bool {
	ra, rb := a.Reference, b.Reference
	a.Reference, b.Reference = nil, nil
	return a == b && (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}

func TestHTTPFailures(t *testing.T) {
	status := func(code int, body string) func(http.ResponseWriter, *http.Request, Request) {
		return func(w http.ResponseWriter, _ *http.Request, req Request) {
			if len(req.Items) == 0 {
				fmt.Fprint(w, `{"rewards": []}`)
				return
			}
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		}
	}
	tests := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, Request)
		want   []string
	}{
		{"server error", status(500, "model not loaded"), []string{"HTTP 500 Internal Server Error", `"model not loaded"`}},
		{"not found", status(404, "no such route"), []string{"HTTP 404", "no such route"}},
		{"malformed", status(200, `{"rewards": [{"id": 0, "reward": 0.5},`), []string{"not JSON", "unexpected end"}},
		{"missing", status(200, `{"rewards": [{"id": 1, "reward": 0.5}]}`), []string{"no reward for 2 of 3 ids (0, 2)"}},
		{"timeout", func(w http.ResponseWriter, r *http.Request, req Request) {
			if len(req.Items) == 0 {
				fmt.Fprint(w, `{"rewards": []}`)
				return
			}
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, []string{"no answer within 300ms (reward.timeout)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&handler{answer: tc.answer})
			defer srv.Close()
			c, err := New(Options{URL: srv.URL, Timeout: 300 * time.Millisecond, StartTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			_, err = c.Score(context.Background(), PurposeTrain, 2, exampleItems()[:3])
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tc.want, "reward url "+srv.URL, "train request of step 2") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if d := time.Since(t0); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestHTTPRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/reward"
	ln.Close()
	c, err := New(Options{URL: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "reward url "+url+": the first (empty) request: no answer:") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error: %v", err)
	}
}

func TestNewChecks(t *testing.T) {
	os.Unsetenv("HACRL_TEST_UNSET_TOKEN")
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Timeout: time.Second}, "give a command or a url"},
		{Options{Command: []string{"x"}, URL: "http://127.0.0.1:1", Timeout: time.Second}, "not both"},
		{Options{Command: []string{"x"}}, "timeout must be > 0"},
		{Options{Command: []string{"x"}, Timeout: time.Second, BatchSize: -1}, "batch size must be >= 0"},
		{Options{Command: []string{"x"}, Timeout: time.Second, TokenEnv: "T"}, "for a url only"},
		{Options{URL: "http://127.0.0.1:1", Timeout: time.Second, TokenEnv: "HACRL_TEST_UNSET_TOKEN"},
			"the environment variable HACRL_TEST_UNSET_TOKEN (reward.token_env) is not set"},
	}
	for _, tc := range tests {
		if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	tests := []struct {
		raw   string
		first int
		n     int
		want  []Result
		err   string
	}{
		{`{"rewards": [{"id": 6, "reward": 0}, {"id": 5, "reward": 1}]}`, 5, 2, []Result{{1, true}, {0, false}}, ""},
		{`{"rewards": [{"id": 0, "reward": 1, "correct": false}, {"id": 1, "reward": 0.25, "correct": true, "note": "x"}]}`, 0, 2,
			[]Result{{1, false}, {0.25, true}}, ""},
		{`{"rewards": []}`, 0, 0, []Result{}, ""},
		{`{"rewards": [{"id": 0, "reward": 1}]}`, 0, 0, nil, "unknown id 0 (the request had no items)"},
		{`{"rewards": [{"reward": 1}]}`, 0, 1, nil, `rewards[0] has no "id"`},
		{`{"rewards": [{"id": 0, "reward": 1e999}]}`, 0, 1, nil, "not JSON"},
		{`{"rewards": [{"id": 0, "reward": Infinity}]}`, 0, 1, nil, "finite numbers"},
		{`{"rewards": null}`, 0, 1, nil, `no "rewards" list`},
		{`[{"id": 0, "reward": 1}]`, 0, 1, nil, "not JSON of the form"},
		{`{"rewards": [{"id": 0, "reward": 1}]} {"rewards": []}`, 0, 1, nil, "not JSON"},
		{`{"rewards": [{"id": 0.5, "reward": 1}]}`, 0, 1, nil, "not JSON"},
	}
	for _, tc := range tests {
		got, err := parseAnswer([]byte(tc.raw), tc.first, tc.n, [2]float64{0, 1})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.raw, got, err, tc.want)
		}
	}
}

// A declared range replaces [0, 1]: rewards inside it pass, with "correct"
// defaulting to the range's max; rewards outside fail, naming the range; and
// New refuses a range that is not one.
func TestRewardRange(t *testing.T) {
	for _, tc := range []struct {
		rng  [2]float64
		raw  string
		want []Result
		err  string
	}{
		{[2]float64{-1, 1}, `{"rewards": [{"id": 0, "reward": -1}, {"id": 1, "reward": 1}]}`, []Result{{-1, false}, {1, true}}, ""},
		{[2]float64{0, 10}, `{"rewards": [{"id": 0, "reward": 7.5}, {"id": 1, "reward": 10}]}`, []Result{{7.5, false}, {10, true}}, ""},
		{[2]float64{-1, 1}, `{"rewards": [{"id": 0, "reward": -1.5}, {"id": 1, "reward": 1}]}`, nil, "reward -1.5 is outside [-1, 1]"},
		{[2]float64{0, 10}, `{"rewards": [{"id": 0, "reward": 10.5}, {"id": 1, "reward": 1}]}`, nil, "reward 10.5 is outside [0, 10]"},
	} {
		got, err := parseAnswer([]byte(tc.raw), 0, 2, tc.rng)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %s: %v, want %q", tc.rng, tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v %s: %v %v, want %v", tc.rng, tc.raw, got, err, tc.want)
		}
	}
	for _, rng := range [][2]float64{{1, 1}, {2, -1}, {0, math.Inf(1)}} {
		if _, err := New(Options{Command: []string{"x"}, Timeout: time.Second, Range: rng}); err == nil || !strings.Contains(err.Error(), "reward range") {
			t.Errorf("range %v: %v", rng, err)
		}
	}
}
