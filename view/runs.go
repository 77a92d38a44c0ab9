package view

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/rollout"
)

// run is one run directory and what its poller last saw of it.
type run struct {
	id, dir string
	name    string
	method  string
	steps   int
	agents  []string // from the config, in config order; nil without one

	mu sync.Mutex
	// The metrics file (metrics.jsonl, or an archive's metrics.jsonl.gz).
	fi      os.FileInfo // nil while there is none
	size    int64       // its content's size (decompressed for an archive)
	high    int64       // the largest size any version of the file had
	gen     int         // how many times the file was rewritten
	scanned int64       // bytes of whole lines read for lastStep and seen
	last    int         // the largest step of those lines
	seen    []string    // agents of those lines, in order of appearance
	archive []byte      // an archive's content, by fi
	// The rollout logs.
	logSteps []int
	done     bool
}

// runConfig is what the view reads of a run's config.yaml (or an
// experiment cell's cell.yaml), leniently: a config of another version of
// hacrl still names its run and agents.
type runConfig struct {
	Name   string `yaml:"name"`
	Steps  int    `yaml:"steps"`
	Method struct {
		Name string `yaml:"name"`
	} `yaml:"method"`
	Agents []struct {
		Name string `yaml:"name"`
	} `yaml:"agents"`
}

// openRun checks dir and reads its config and current files.
func openRun(id, dir string) (*run, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("view: run directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("view: %s is not a directory (want a run's output directory)", dir)
	}
	r := &run{id: id, dir: dir, name: filepath.Base(filepath.Clean(dir))}
	found := false
	for _, name := range []string{metrics.FileName, metrics.FileName + ".gz", "config.yaml", "cell.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("view: %s is not a run directory: it has no %s, %s.gz, config.yaml or cell.yaml", dir, metrics.FileName, metrics.FileName)
	}
	for _, name := range []string{"config.yaml", "cell.yaml"} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if missing(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		var c runConfig
		if err := yaml.Unmarshal(data, &c); err != nil {
			return nil, fmt.Errorf("view: %s: %w", path, err)
		}
		if c.Name != "" {
			r.name = c.Name
		}
		r.method, r.steps = c.Method.Name, c.Steps
		for _, a := range c.Agents {
			r.agents = append(r.agents, a.Name)
		}
		break
	}
	if _, err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

// runInfo is a run as /api/runs lists it.
type runInfo struct {
	ID       string   `json:"id"`
	Dir      string   `json:"dir"`
	Name     string   `json:"name"`
	Agents   []string `json:"agents"`
	Method   string   `json:"method"`
	Steps    int      `json:"steps"`
	LastStep int      `json:"last_step"`
	Done     bool     `json:"done"`
}

func (r *run) info() runInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	agents := r.agents
	if agents == nil {
		agents = r.seen
	}
	if agents == nil {
		agents = []string{}
	}
	return runInfo{ID: r.id, Dir: r.dir, Name: r.name, Agents: agents, Method: r.method, Steps: r.steps, LastStep: r.last, Done: r.done}
}

// event is one server-sent event.
type event struct {
	name string
	data []byte
}

// eventData is an event's data: the run, and the step of a new rollout
// log or reset for a rewritten file.
type eventData struct {
	Run   string `json:"run"`
	Step  int    `json:"step,omitempty"`
	Reset bool   `json:"reset,omitempty"`
}

func (r *run) event(name string, step int, reset bool) event {
	data, _ := json.Marshal(eventData{r.id, step, reset})
	return event{name, data}
}

// check looks at r's files and returns the events of what changed since
// the last look.
func (r *run) check() ([]event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var evs []event
	src, fi, err := r.openMetricsLocked()
	if err != nil && !missing(err) {
		return nil, err
	}
	if err == nil {
		defer src.close()
	}
	switch {
	case err != nil: // no metrics file
		if r.fi != nil {
			r.resetLocked()
			evs = append(evs, r.event("metrics", 0, true))
		}
	default:
		rewritten := !os.SameFile(r.fi, fi) || src.size < r.size ||
			src.f == nil && !fi.ModTime().Equal(r.fi.ModTime()) // an archive is written whole
		if r.fi != nil && rewritten {
			r.resetLocked()
			evs = append(evs, r.event("metrics", 0, true))
		}
		r.fi, r.size = fi, src.size
		r.high = max(r.high, r.size)
		if r.size > r.scanned {
			n, err := r.scanLocked(src)
			if err != nil {
				return evs, err
			}
			if n > 0 {
				evs = append(evs, r.event("metrics", 0, false))
			}
		}
	}
	steps, err := rollout.LogSteps(r.dir)
	if err != nil {
		return evs, fmt.Errorf("view: %w", err)
	}
	for _, s := range steps {
		if _, ok := slices.BinarySearch(r.logSteps, s); !ok {
			evs = append(evs, r.event("rollouts", s, false))
		}
	}
	for _, s := range r.logSteps {
		if _, ok := slices.BinarySearch(steps, s); !ok {
			evs = append(evs, r.event("rollouts", 0, true))
			break
		}
	}
	r.logSteps = steps
	r.done = r.isDone()
	return evs, nil
}

// resetLocked forgets what was read of a metrics file that was rewritten.
func (r *run) resetLocked() {
	r.fi, r.size, r.scanned, r.last, r.seen = nil, 0, 0, 0, nil
	r.gen++
}

// isDone reports whether the run has ended: an experiment cell's done.json,
// or a final checkpoint of every agent.
func (r *run) isDone() bool {
	if _, err := os.Stat(filepath.Join(r.dir, "done.json")); err == nil {
		return true
	}
	if len(r.agents) == 0 {
		return false
	}
	for _, a := range r.agents {
		if _, err := os.Stat(filepath.Join(r.dir, "final", a, "agent.json")); err != nil {
			return false
		}
	}
	return true
}

// scanChunk is how much of a metrics file the poller reads at a time.
const scanChunk = 4 << 20

// scanLocked reads the whole lines after r.scanned, a chunk at a time, for
// the largest step and the agents, and returns how many bytes it read.
func (r *run) scanLocked(src *metricsSource) (int64, error) {
	var n int64
	for {
		data, err := src.wholeLines(r.scanned, scanChunk)
		if err != nil || len(data) == 0 {
			return n, err
		}
		r.scanLines(data)
		r.scanned += int64(len(data))
		n += int64(len(data))
	}
}

// scanLines notes the steps and agents of whole lines.
func (r *run) scanLines(data []byte) {
	for line := range bytes.Lines(data) {
		step, agent, ok := lineHead(line)
		if !ok {
			rec, err := metrics.ParseLine(line)
			if err != nil {
				continue // /api/metrics reports it, naming the place
			}
			step, agent = rec.Step, rec.Agent
		}
		r.last = max(r.last, step)
		if agent != "" && !slices.Contains(r.seen, agent) {
			r.seen = append(r.seen, agent)
		}
	}
}

// lineHead reads the step and agent at the start of a line as
// metrics.Writer writes it ({"step":N,"agent":"NAME",…}) without decoding
// the rest; ok is false for any other shape.
func lineHead(line []byte) (step int, agent string, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"step":`))
	if !ok {
		return 0, "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	step, err := strconv.Atoi(string(rest[:i]))
	if err != nil {
		return 0, "", false
	}
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"agent":"`))
	if !ok {
		return 0, "", false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return 0, "", false
	}
	return step, string(rest[:end]), true
}

// metricsSource reads a run's metrics content: the plain file, or an
// archive's decompressed bytes.
type metricsSource struct {
	path string
	f    *os.File // the plain file
	data []byte   // an archive's content
	size int64
}

func (m *metricsSource) close() {
	if m.f != nil {
		m.f.Close()
	}
}

// openMetricsLocked opens the run's metrics file (metrics.jsonl, else
// metrics.jsonl.gz); the error is os.ErrNotExist's when there is neither.
func (r *run) openMetricsLocked() (*metricsSource, os.FileInfo, error) {
	path := filepath.Join(r.dir, metrics.FileName)
	f, err := os.Open(path)
	if err == nil {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("view: %w", err)
		}
		return &metricsSource{path: path, f: f, size: fi.Size()}, fi, nil
	}
	if !missing(err) {
		return nil, nil, fmt.Errorf("view: %w", err)
	}
	gz := path + ".gz"
	fi, err := os.Stat(gz)
	if err != nil {
		return nil, nil, err
	}
	if r.archive == nil || r.fi == nil || !os.SameFile(fi, r.fi) || !fi.ModTime().Equal(r.fi.ModTime()) {
		f, err := os.Open(gz)
		if err != nil {
			return nil, nil, fmt.Errorf("view: %w", err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, nil, fmt.Errorf("view: %s: %w", gz, err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			return nil, nil, fmt.Errorf("view: %s: %w", gz, err)
		}
		r.archive = data
	}
	return &metricsSource{path: gz, data: r.archive, size: int64(len(r.archive))}, fi, nil
}

// readAt reads len(p) bytes at off (fewer only at the end).
func (m *metricsSource) readAt(p []byte, off int64) (int, error) {
	if m.f == nil {
		if off >= int64(len(m.data)) {
			return 0, io.EOF
		}
		return copy(p, m.data[off:]), nil
	}
	n, err := m.f.ReadAt(p, off)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("view: %w", err)
	}
	return n, nil
}

// wholeLines returns the whole lines of the content from off, up to limit
// bytes of them (a first line longer than limit whole). Bytes after the
// last newline are left out.
func (m *metricsSource) wholeLines(off int64, limit int) ([]byte, error) {
	want := m.size - off
	if want <= 0 {
		return nil, nil
	}
	if want > int64(limit) {
		want = int64(limit)
	}
	for {
		buf := make([]byte, want)
		n, err := m.readAt(buf, off)
		if err != nil {
			return nil, err
		}
		buf = buf[:n]
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return buf[:i+1], nil
		}
		if off+int64(n) >= m.size {
			return nil, nil // no whole line yet
		}
		want = min(2*want+1, m.size-off) // a line longer than limit
	}
}

// atLineStart reports whether off starts a line of the content.
func (m *metricsSource) atLineStart(off int64) (bool, error) {
	if off == 0 {
		return true, nil
	}
	var b [1]byte
	n, err := m.readAt(b[:], off-1)
	if err != nil {
		return false, err
	}
	return n == 1 && b[0] == '\n', nil
}
