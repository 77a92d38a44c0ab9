// Package mlflowtest gives tests a real MLflow tracking server: `mlflow
// server` from the pinned environment scripts/mlflowenv.sh installs, on a free
// loopback port with a sqlite backend in the test's temporary directory; and
// MLflow's own Python client to read a run back with (the oracle of what
// package tracking/mlflow logged).
//
// $HACRL_MLFLOW names another `mlflow` command to use. HACRL_SKIP_PYPI=1
// skips the tests that need it, as for package pyenv.
package mlflowtest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/setupscript"
)

var (
	once    sync.Once
	command string
	findErr error
)

// Command returns the `mlflow` command, installing its environment the first
// time (a few minutes).
func Command(t testing.TB) string {
	t.Helper()
	if os.Getenv("HACRL_SKIP_PYPI") == "1" {
		t.Skip("HACRL_SKIP_PYPI=1: skipping the test against an MLflow server")
	}
	once.Do(func() {
		if command = os.Getenv("HACRL_MLFLOW"); command == "" {
			command, findErr = setupscript.Run("mlflowenv.sh", 20*time.Minute)
		}
	})
	if findErr != nil {
		t.Fatalf("mlflowtest: %v", findErr)
	}
	return command
}

// Server is an `mlflow server` the test started.
type Server struct {
	URI    string // http://127.0.0.1:PORT
	t      testing.TB
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan error
	log    *bytes.Buffer
}

// Start starts a server on a free loopback port, with its sqlite database
// and artifacts in a temporary directory, and waits until it answers. The
// test's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	Command(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{URI: fmt.Sprintf("http://127.0.0.1:%d", port), t: t, port: port, dir: t.TempDir()}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			log := s.log.String()
			t.Logf("mlflow server's log (its end):\n%s", log[max(0, len(log)-3000):])
		}
	})
	s.Restart()
	return s
}

// Restart starts the server (again, after Kill) on the same port and
// database, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("mlflowtest: Restart of a running server")
	}
	s.log = &bytes.Buffer{}
	cmd := exec.Command(Command(s.t), "server", "--host", "127.0.0.1", "--port", strconv.Itoa(s.port), "--workers", "1",
		"--backend-store-uri", "sqlite:///"+filepath.Join(s.dir, "mlflow.db"),
		"--default-artifact-root", filepath.Join(s.dir, "artifacts"))
	cmd.Env = append(os.Environ(), "MLFLOW_ENABLE_TELEMETRY=false", "DO_NOT_TRACK=true", "PYTHONUNBUFFERED=1",
		"MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false") // no job workers: a quicker start
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// Its own process group: the server's workers go with it on Kill.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("mlflowtest: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan error, 1)
	go func() { s.exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if resp, err := client.Get(s.URI + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-s.exited:
			s.cmd = nil
			s.t.Fatalf("mlflowtest: mlflow server exited (%v):\n%s", err, s.log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("mlflowtest: mlflow server did not answer on %s in 2 minutes:\n%s", s.URI, s.log)
		}
	}
}

// Kill stops the server at once (SIGKILL to its process group), as a crash
// would, and waits until it is gone.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

//go:embed testdata/read_run.py
var readRunPy []byte

// Run is an MLflow run as MLflow's Python client reads it back.
type Run struct {
	Status     string `json:"status"`
	RunName    string `json:"run_name"`
	Experiment string `json:"experiment"`
	// ExperimentID is the experiment's id.
	ExperimentID string            `json:"experiment_id"`
	Params       map[string]string `json:"params"`
	Tags         map[string]string `json:"tags"`
	// Metrics is each metric's whole history: step, value, timestamp (ms).
	Metrics map[string][]Point `json:"metrics"`
}

// ByStep returns each metric's points by step, and fails t for a step
// logged twice (a resume must not repeat what was sent before).
func (r *Run) ByStep(t testing.TB) map[string]map[int64]Point {
	t.Helper()
	out := map[string]map[int64]Point{}
	for k, h := range r.Metrics {
		out[k] = map[int64]Point{}
		for _, p := range h {
			if _, dup := out[k][p.Step]; dup {
				t.Errorf("%s: step %d logged twice", k, p.Step)
			}
			out[k][p.Step] = p
		}
	}
	return out
}

// Point is one logged value of a metric.
type Point struct {
	Step      int64
	Value     float64
	Timestamp int64
}

// UnmarshalJSON reads [step, value, timestamp], value a number or "NaN",
// "Infinity", "-Infinity".
func (p *Point) UnmarshalJSON(b []byte) error {
	var raw [3]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[0], &p.Step); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[2], &p.Timestamp); err != nil {
		return err
	}
	var s string
	if json.Unmarshal(raw[1], &s) == nil {
		v, err := strconv.ParseFloat(s, 64) // NaN, Infinity, -Infinity
		p.Value = v
		return err
	}
	return json.Unmarshal(raw[1], &p.Value)
}

// ReadRun reads run runID back from the server with MLflow's Python client
// (testdata/read_run.py, under the interpreter of the mlflow command's
// environment).
func (s *Server) ReadRun(runID string) *Run {
	s.t.Helper()
	script := filepath.Join(s.t.TempDir(), "read_run.py")
	if err := os.WriteFile(script, readRunPy, 0o644); err != nil {
		s.t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]string{"uri": s.URI, "run_id": runID})
	py := filepath.Join(filepath.Dir(Command(s.t)), "python")
	cmd := exec.Command(py, script)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "MLFLOW_ENABLE_TELEMETRY=false", "DO_NOT_TRACK=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("mlflowtest: %s: %v\n%s", script, err, stderr.String())
	}
	var run Run
	if err := json.Unmarshal(out, &run); err != nil {
		s.t.Fatalf("mlflowtest: %s: %v\n%.2000s", script, err, out)
	}
	return &run
}
