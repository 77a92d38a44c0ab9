// Package backend creates the GoMLX compute backend every engine in hacrl runs on.
//
// The default is GoMLX's pure-Go backend with an explicit configuration: the
// Go backend's default parallel executor can deadlock on small machines (see
// ../shared/docs/gomlx-notes.md, pitfall 1), so hacrl never relies on it.
// Tests use "go:ops_sequential" (ops one at a time, matmuls still parallel);
// training and benchmarks default to "go:parallelism=-1", the fastest setting
// that has not been seen to hang.
//
// HACRL_BACKEND, or else GOMLX_BACKEND, overrides the choice.
//
// The XLA backend (GPUs: "xla:cuda"; XLA on the CPU: "xla:cpu") is compiled
// in only with -tags xla, and loads a PJRT plugin file found on this machine
// (FindXLAPlugin): $HACRL_XLA_PLUGIN, else pip's jax-cuda13-pjrt or
// jax-cuda12-pjrt (cuda) or lammps-jax-pjrt-cpu (cpu), else go-xla's own
// directories. GoMLX's XLA backend would download a plugin when it finds
// none; hacrl turns that off, checks the plugin's PJRT C API version
// against the one go-xla is built for, and reports every place it looked.
//
// Creating a backend writes nothing on standard output, which belongs to the
// commands' results (JSON): the Go backend's own constructor announces a
// "parallelism=N" option there, so New applies that option itself.
package backend

import (
	"fmt"
	"os"
	"reflect"
	"slices"
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
	key, xs, err := resolve(config)
	if err == nil && xs != nil {
		err = checkXLA(*xs) // on every call: "xla:cuda" may resolve to a cached CPU plugin
	}
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	if b, ok := cached[key]; ok {
		return b, nil
	}
	var b compute.Backend
	if xs != nil {
		b, err = newXLA(*xs)
	} else {
		b, err = create(config)
	}
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	cached[key] = b
	return b, nil
}

// resolve returns the key a backend is cached under: config itself, or for
// the XLA backend the plugin file it loads and its options, so that
// "xla:cpu" and the path it resolves to share one backend.
func resolve(config string) (key string, xs *xlaSpec, err error) {
	name, opts, _ := strings.Cut(config, ":")
	if name != "xla" {
		return config, nil, nil
	}
	if !XLA {
		return "", nil, errNoXLA
	}
	spec, err := xlaPlugin(opts)
	if err != nil {
		return "", nil, err
	}
	return "xla:" + spec.plugin + "," + spec.rest, &spec, nil
}

// create makes the backend for config. GoMLX's Go backend (compute v0.1.3,
// internal/gobackend.New) prints "Go backend: parallelism set to N" on
// standard output when its config has parallelism=N, so that option is taken
// out of the config and set on the backend's worker pool directly.
func create(config string) (compute.Backend, error) {
	name, opts, _ := strings.Cut(config, ":")
	if name != "go" {
		// compute.NewWithConfig panics on a name nothing registered.
		if !slices.Contains(compute.List(), name) {
			return nil, fmt.Errorf("unknown backend %q; valid: go (go:parallelism=N), xla:cuda or xla:cpu (a build with -tags xla)", name)
		}
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
