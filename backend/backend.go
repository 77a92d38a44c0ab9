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
package backend

import (
	"fmt"
	"os"
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
	b, err := compute.NewWithConfig(config)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	cached[config] = b
	return b, nil
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
