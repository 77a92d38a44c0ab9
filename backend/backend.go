// Package backend creates the GoMLX compute backend every engine in hacrl runs on.
//
// The default is GoMLX's pure-Go backend with an explicit configuration: the
// Go backend's default parallel executor can deadlock on small machines (see
// ../shared/docs/gomlx-notes.md, pitfall 1), so hacrl never relies on it.
// Tests use "go:ops_sequential" (ops one at a time, matmuls still parallel);
// training and benchmarks default to "go:parallelism=-1", the fastest setting
// that has not been seen to hang.
//
// HACRL_BACKEND, or else GOMLX_BACKEND, overrides the choice. The XLA backend
// (for GPUs, GOMLX_BACKEND=xla:cuda) is compiled in only with -tags xla.
//
// Creating a backend writes nothing on standard output, which belongs to the
// commands' results (JSON): the Go backend's own constructor announces a
// "parallelism=N" option there, so New applies that option itself.
package backend

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend" // registers "go"
)

// Default is the configuration used when no environment variable names one.
const Default = "go:parallelism=-1"

// Sequential is the safest configuration: one op at a time. Tests use it.
const Sequential = "go:ops_sequential"

var (
	mu     sync.Mutex
	cached = map[string]compute.Backend{}
)

// Config returns the backend configuration in force: HACRL_BACKEND, else
// GOMLX_BACKEND, else fallback. A bare "go" gets fallback's options so the
// deadlocking default executor is never chosen by accident.
func Config(fallback string) string {
	cfg := os.Getenv("HACRL_BACKEND")
	if cfg == "" {
		cfg = os.Getenv("GOMLX_BACKEND")
	}
	if cfg == "" || cfg == "go" {
		return fallback
	}
	return cfg
}

// New returns the backend for config, creating it once per distinct config
// string; every model in a process shares it.
func New(config string) (compute.Backend, error) {
	mu.Lock()
	defer mu.Unlock()
	if b, ok := cached[config]; ok {
		return b, nil
	}
	if strings.HasPrefix(config, "xla") && !xlaCompiled {
		return nil, fmt.Errorf("backend %q: this binary was built without XLA; rebuild with -tags xla (see README)", config)
	}
	b, err := create(config)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	cached[config] = b
	return b, nil
}

// create makes the backend for config. GoMLX's Go backend (compute v0.1.3,
// internal/gobackend.New) prints "Go backend: parallelism set to N" on
// standard output when its config has parallelism=N, so that option is taken
// out of the config and set on the backend's worker pool directly.
func create(config string) (compute.Backend, error) {
	name, opts, _ := strings.Cut(config, ":")
	if name != "go" {
		return compute.NewWithConfig(config)
	}
	var keep []string
	parallelism, set := 0, false
	for _, o := range strings.Split(opts, ",") {
		v, ok := strings.CutPrefix(o, "parallelism=")
		if !ok {
			keep = append(keep, o)
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("parallelism=%s: want an integer (-1: unlimited)", v)
		}
		parallelism, set = n, true
	}
	b, err := compute.NewWithConfig("go:" + strings.Join(keep, ","))
	if err != nil || !set {
		return b, err
	}
	if err := setParallelism(b, parallelism); err != nil {
		b.Finalize()
		return nil, err
	}
	return b, nil
}

// workerPool is the part of the Go backend's worker pool that hacrl uses.
type workerPool interface {
	SetMaxParallelism(int)
	MaxParallelism() int
}

// goWorkers returns the worker pool of a Go backend: its exported field
// Workers, whose type lives in an internal package of GoMLX compute.
func goWorkers(b compute.Backend) (workerPool, error) {
	v := reflect.ValueOf(b)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		f := v.FieldByName("Workers")
		if f.IsValid() && f.CanInterface() && !(f.Kind() == reflect.Pointer && f.IsNil()) {
			if p, ok := f.Interface().(workerPool); ok {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("%T has no worker pool (field Workers with SetMaxParallelism); the GoMLX compute version changed", b)
}

// setParallelism sets the Go backend's parallelism as its "parallelism=N"
// option does, without the option's print.
func setParallelism(b compute.Backend, n int) error {
	w, err := goWorkers(b)
	if err != nil {
		return err
	}
	w.SetMaxParallelism(n)
	return nil
}

// Must is New for programs and tests that cannot go on without a backend.
func Must(config string) compute.Backend {
	b, err := New(config)
	if err != nil {
		panic(err)
	}
	return b
}

// Choose is the configuration a program runs on: the environment's choice
// (see Config), else explicit (e.g. a config file's backend field), else Default.
func Choose(explicit string) string {
	if explicit == "" {
		explicit = Default
	}
	return Config(explicit)
}
