package view

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// runOf returns the run the request's run parameter names, or writes a 400.
func (s *Server) runOf(w http.ResponseWriter, req *http.Request) *run {
	id := req.URL.Query().Get("run")
	for _, r := range s.runs {
		if r.id == id {
			return r
		}
	}
	if id == "" {
		writeError(w, http.StatusBadRequest, "missing run: want ?run=ID, an id from /api/runs (0 to %d)", len(s.runs)-1)
	} else {
		writeError(w, http.StatusBadRequest, "run %q: no such run; the ids are 0 to %d (/api/runs)", id, len(s.runs)-1)
	}
	return nil
}

func (s *Server) handleRuns(w http.ResponseWriter, req *http.Request) {
	out := struct {
		Runs []runInfo `json:"runs"`
	}{Runs: []runInfo{}}
	for _, r := range s.runs {
		s.refresh(r)
		out.Runs = append(out.Runs, r.info())
	}
	writeJSON(w, out)
}

func (s *Server) handleMetrics(w http.ResponseWriter, req *http.Request) {
	r := s.runOf(w, req)
	if r == nil {
		return
	}
	q := req.URL.Query()
	var off int64
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "offset %q: want a byte offset into metrics.jsonl, an integer >= 0 (0: the start; then the offset of the last answer)", v)
			return
		}
		off = n
	}
	gen := -1
	if v := q.Get("gen"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "gen %q: want the gen of an earlier answer, an integer >= 0", v)
			return
		}
		gen = n
	}
	s.refresh(r)
	body, status, err := r.metricsAnswer(off, gen, s.cfg.MaxChunk)
	if err != nil {
		writeError(w, status, "%v", err)
		return
	}
	writeBody(w, body)
}

// metricsAnswer encodes the /api/metrics answer from off, or returns an
// error with its status.
func (r *run) metricsAnswer(off int64, gen, chunk int) ([]byte, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	src, _, err := r.openMetricsLocked()
	if missing(err) {
		if off > 0 && off <= r.high {
			return emptyAnswer(r.gen, true), 0, nil
		}
		if off > 0 {
			return nil, http.StatusBadRequest, fmt.Errorf("offset %d is beyond the end of %s, which the run has not written yet", off, metrics.FileName)
		}
		return emptyAnswer(r.gen, false), 0, nil
	}
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	defer src.close()
	reset := gen >= 0 && gen != r.gen
	if !reset && off > src.size {
		if off > r.high {
			return nil, http.StatusBadRequest, fmt.Errorf("offset %d is beyond the end of %s (%d bytes)", off, src.path, src.size)
		}
		reset = true // the file was longer: it was rewritten
	}
	if !reset {
		ok, err := src.atLineStart(off)
		if err != nil {
			return nil, http.StatusInternalServerError, err
		}
		if !ok && r.gen == 0 {
			return nil, http.StatusBadRequest, fmt.Errorf("offset %d is not at the start of a line of %s: want 0 or the offset of an earlier answer", off, src.path)
		}
		reset = !ok // inside a line of a file rewritten since
	}
	if reset {
		off = 0
	}
	data, err := src.wholeLines(off, chunk)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	b := make([]byte, 0, len(data)+len(data)/8+64)
	b = append(b, `{"offset":`...)
	b = strconv.AppendInt(b, off+int64(len(data)), 10)
	b = append(b, `,"gen":`...)
	b = strconv.AppendInt(b, int64(r.gen), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendBool(b, reset)
	b = append(b, `,"records":[`...)
	at, n := off, 0
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) > 0 {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			var ok bool
			if b, ok = appendLine(b, line); !ok {
				rec, err := metrics.ParseLine(line)
				if err != nil {
					return nil, http.StatusInternalServerError, fmt.Errorf("%s: the line at byte %d: %v", src.path, at, err)
				}
				b = appendRecord(b, rec)
			}
		}
		at += int64(len(line))
	}
	return append(b, "]}\n"...), 0, nil
}

// emptyAnswer is the /api/metrics answer of a run with no metrics file.
func emptyAnswer(gen int, reset bool) []byte {
	return fmt.Appendf(nil, `{"offset":0,"gen":%d,"reset":%t,"records":[]}`+"\n", gen, reset)
}

// appendRecord appends rec as /api/metrics gives it, with null for NaN and ±Inf.
func appendRecord(b []byte, rec metrics.Record) []byte {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(rec.Step), 10)
	b = append(b, `,"agent":`...)
	b = appendString(b, rec.Agent)
	b = append(b, `,"time":`...)
	b = appendNumber(b, rec.Time)
	b = append(b, `,"values":{`...)
	for j, k := range metrics.SortedKeys(rec.Values) {
		if j > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendNumber(b, rec.Values[k])
	}
	return append(b, "}}"...)
}

// appendLine appends the API form of a line in metrics.Writer's shape —
// {"step":N,"agent":"A","time":T, then "key":number-or-null pairs} — as
// ParseLine and appendRecord would give it, without decoding it: the pairs
// are copied as they are. Any other line (not JSON, other fields, another
// order, spaces) is left to ParseLine: ok is false and b is unchanged.
func appendLine(b, line []byte) (_ []byte, ok bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	rest, ok := bytes.CutPrefix(line, []byte(`{"step":`))
	if !ok {
		return b, false
	}
	n := scanInt(rest)
	step := rest[:n]
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(`,"agent":`)); !ok || n == 0 {
		return b, false
	}
	n = scanString(rest)
	agent := rest[:n]
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(`,"time":`)); !ok || n == 0 {
		return b, false
	}
	n = scanNumber(rest)
	tm := rest[:n]
	pairs := rest[n:]
	if n == 0 || len(pairs) == 0 {
		return b, false
	}
	for rest = pairs; rest[0] == ',' && len(rest) > 1; {
		rest = rest[1:]
		n = scanString(rest)
		if n <= 2 || reservedKey(rest[:n]) || len(rest) == n || rest[n] != ':' {
			return b, false
		}
		rest = rest[n+1:]
		if n = scanNumber(rest); n == 0 && bytes.HasPrefix(rest, []byte("null")) {
			n = 4
		}
		if n == 0 || len(rest) == n {
			return b, false
		}
		rest = rest[n:]
	}
	if len(rest) != 1 || rest[0] != '}' {
		return b, false
	}
	b = append(b, `{"step":`...)
	b = append(b, step...)
	b = append(b, `,"agent":`...)
	b = append(b, agent...)
	b = append(b, `,"time":`...)
	b = append(b, tm...)
	b = append(b, `,"values":{`...)
	if len(pairs) > 1 {
		b = append(b, pairs[1:len(pairs)-1]...)
	}
	return append(b, "}}"...), true
}

// reservedKey reports whether a quoted key is one of the line's own fields.
func reservedKey(q []byte) bool {
	switch string(q) {
	case `"step"`, `"agent"`, `"time"`:
		return true
	}
	return false
}

// scanInt returns the length of the JSON non-negative integer at the start
// of b (0: none).
func scanInt(b []byte) int {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n > 1 && b[0] == '0' || n > 18 {
		return 0 // a leading zero is not JSON; a longer one may overflow
	}
	return n
}

// scanNumber returns the length of the JSON number at the start of b (0:
// none, or one that might lie beyond float64's range — more than 200 digits
// before the point, an exponent of three digits — left to ParseLine).
func scanNumber(b []byte) int {
	digits := func(i int) int {
		d := 0
		for i+d < len(b) && b[i+d] >= '0' && b[i+d] <= '9' {
			d++
		}
		return d
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := digits(i)
	if d == 0 || d > 1 && b[i] == '0' || d > 200 {
		return 0
	}
	i += d
	if i < len(b) && b[i] == '.' {
		if d = digits(i + 1); d == 0 {
			return 0
		}
		i += 1 + d
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if d = digits(i); d == 0 || d > 2 { // with at most 200 digits before the point: within float64's range
			return 0
		}
		i += d
	}
	return i
}

// scanString returns the length of the JSON string, quotes included, at the
// start of b (0: none, or one with a \u escape or invalid UTF-8, left to
// ParseLine).
func scanString(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return 0
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			if !utf8.Valid(b[1:i]) {
				return 0
			}
			return i + 1
		case c < 0x20:
			return 0
		case c == '\\':
			if i+1 >= len(b) || !bytes.ContainsRune([]byte(`"\/bfnrt`), rune(b[i+1])) {
				return 0
			}
			i++
		}
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

func appendNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func (s *Server) handleRolloutSteps(w http.ResponseWriter, req *http.Request) {
	r := s.runOf(w, req)
	if r == nil {
		return
	}
	steps, err := rollout.LogSteps(r.dir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if steps == nil {
		steps = []int{}
	}
	writeJSON(w, map[string][]int{"steps": steps})
}

func (s *Server) handleRollouts(w http.ResponseWriter, req *http.Request) {
	r := s.runOf(w, req)
	if r == nil {
		return
	}
	v := req.PathValue("step")
	step, err := strconv.Atoi(v)
	if err != nil || step < 1 {
		writeError(w, http.StatusBadRequest, "step %q: want a logged step, an integer >= 1 (/api/rollouts?run=%s lists them)", v, r.id)
		return
	}
	path := rollout.LogPath(r.dir, step)
	fi, err := os.Stat(path)
	if missing(err) {
		steps, _ := rollout.LogSteps(r.dir)
		writeError(w, http.StatusBadRequest, "step %d of run %s is not logged; logged steps: %s", step, r.id, listSteps(steps))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	body, err := s.logs.get(path, fi, func() ([]byte, error) { return encodeLog(path, step) })
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeBody(w, body)
}

// encodeLog reads the rollout log at path and writes the answer of
// /api/rollouts/STEP: its lines, as the log holds them.
func encodeLog(path string, step int) ([]byte, error) {
	b := []byte(`{"step":` + strconv.Itoa(step) + `,"records":[`)
	n := 0
	err := rollout.ScanLog(path, func(line []byte, _ *rollout.Record) error {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, line...)
		n++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(b, "]}\n"...), nil
}

// listSteps lists steps for an error message, the first few and the last.
func listSteps(steps []int) string {
	if len(steps) == 0 {
		return "none"
	}
	var parts []string
	for i, s := range steps {
		if i == 10 && len(steps) > 11 {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(steps)-11), strconv.Itoa(steps[len(steps)-1]))
			break
		}
		parts = append(parts, strconv.Itoa(s))
	}
	return strings.Join(parts, ", ")
}

// logCache keeps the answers of the last few rollout logs read, each valid
// while its file keeps its size and modification time.
type logCache struct {
	mu    sync.Mutex
	most  int
	order *list.List // of *logEntry, most recent first
	byKey map[string]*list.Element
}

type logEntry struct {
	path  string
	size  int64
	mtime time.Time
	body  []byte
}

func newLogCache(most int) *logCache {
	return &logCache{most: most, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the cached answer for path as fi describes it, or makes it.
func (c *logCache) get(path string, fi os.FileInfo, make func() ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if el, ok := c.byKey[path]; ok {
		e := el.Value.(*logEntry)
		if e.size == fi.Size() && e.mtime.Equal(fi.ModTime()) {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			return e.body, nil
		}
		c.order.Remove(el)
		delete(c.byKey, path)
	}
	c.mu.Unlock()
	body, err := make() // outside the lock: another log can be read meanwhile
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[path]; ok {
		c.order.Remove(el)
	}
	c.byKey[path] = c.order.PushFront(&logEntry{path: path, size: fi.Size(), mtime: fi.ModTime(), body: body})
	for c.order.Len() > c.most {
		el := c.order.Back()
		delete(c.byKey, el.Value.(*logEntry).path)
		c.order.Remove(el)
	}
	return body, nil
}
