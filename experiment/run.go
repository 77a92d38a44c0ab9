package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hacrl/hacrl/internal/atomicfile"
	"go.yaml.in/yaml/v3"
)

// Dir is the output directory of a cell.
func (c *Config) Dir(cell Cell) string {
	return filepath.Join(c.Out, "cells", cell.Setting, cell.Method, fmt.Sprintf("seed%d", cell.Seed))
}

// Done reports whether a cell finished (its done.json exists).
func (c *Config) Done(cell Cell) bool {
	_, err := os.Stat(filepath.Join(c.Dir(cell), "done.json"))
	return err == nil
}

// Runner runs the cells of a grid.
type Runner struct {
	// Binary is the hacrl executable that trains a cell (default: this one).
	Binary string
	// Log receives progress lines.
	Log io.Writer
}

// Run trains every unfinished cell, Parallel at a time, each as
// `hacrl train CELL/config.yaml --resume`. Cancelling ctx stops the running
// cells (they save a checkpoint and resume next time) and starts no more.
func (r *Runner) Run(ctx context.Context, c *Config) error {
	bin := r.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		bin = exe
	}
	cells := c.Cells()
	var todo []Cell
	for _, cell := range cells {
		if !c.Done(cell) {
			todo = append(todo, cell)
		}
	}
	// Seed by seed: a grid stopped early has every setting and method at
	// its first seeds, which pair by seed, rather than some settings alone.
	rank := map[int64]int{}
	for i, s := range c.Seeds {
		rank[s] = i
	}
	slices.SortStableFunc(todo, func(a, b Cell) int { return rank[a.Seed] - rank[b.Seed] })
	fmt.Fprintf(r.Log, "experiment %s: %d cells, %d done, %d to run, %d at a time\n", c.Name, len(cells), len(cells)-len(todo), len(todo), c.Parallel)
	start := time.Now()
	var (
		mu       sync.Mutex
		finished int
		firstErr error
		wg       sync.WaitGroup
	)
	jobs := make(chan Cell)
	for range c.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cell := range jobs {
				if ctx.Err() != nil {
					continue // a stopped grid starts no more cells
				}
				t0 := time.Now()
				err := r.runCell(ctx, c, bin, cell)
				mu.Lock()
				finished++
				if err != nil && firstErr == nil && ctx.Err() == nil {
					firstErr = err
				}
				el := time.Since(start)
				eta := time.Duration(float64(el) / float64(finished) * float64(len(todo)-finished))
				status := "done"
				switch {
				case err != nil && ctx.Err() != nil:
					status = "interrupted (resumes from its last checkpoint)"
				case err != nil:
					status = "FAILED: " + err.Error()
				}
				fmt.Fprintf(r.Log, "[%d/%d] %s %s in %s · elapsed %s · ETA %s\n", finished, len(todo), cell.ID(), status,
					time.Since(t0).Round(time.Second), el.Round(time.Second), eta.Round(time.Second))
				mu.Unlock()
			}
		}()
	}
	for _, cell := range todo {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		jobs <- cell
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// childEnv is the environment of a cell's process: the grid's own, with
// GOMAXPROCS set to the cores divided among the cells that run at once,
// unless the caller set GOMAXPROCS. The native engine spreads its kernels
// over GOMAXPROCS threads, so cells side by side would otherwise each start
// a thread per core, parallel times more threads than cores. On 2 cores it
// measured the same either way (6 short cells two at a time: medians of 3
// alternated runs 47.4 s with one thread each, 47.7 s with two); it bounds
// the threads where cores and cells are many. The metrics do not depend on
// the thread count.
func childEnv(env []string, parallel, cpus int) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	if parallel <= 1 {
		return env
	}
	return append(env, fmt.Sprintf("GOMAXPROCS=%d", max(1, cpus/parallel)))
}

// runCell writes the cell's config and trains it in a child process.
func (r *Runner) runCell(ctx context.Context, c *Config, bin string, cell Cell) error {
	dir := c.Dir(cell)
	rc, err := cell.RunConfig(c)
	if err != nil {
		return err
	}
	rc.Out = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := yaml.Marshal(rc)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "cell.yaml")
	if err := atomicfile.WriteFile(cfgPath, data); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "train.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	t0 := time.Now()
	cmd := exec.Command(bin, "train", cfgPath, "--resume")
	cmd.Env = childEnv(os.Environ(), c.Parallel, runtime.NumCPU())
	var summary bytes.Buffer
	cmd.Stdout = io.MultiWriter(logf, &summary)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Signal(os.Interrupt) // the child finishes its step and checkpoints
		err = <-done
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: hacrl train exited with %v (see %s)", cell.ID(), ee, filepath.Join(dir, "train.log"))
		}
		return err
	}
	marker, _ := json.MarshalIndent(map[string]any{
		"cell": cell.ID(), "seconds": time.Since(t0).Seconds(), "summary": summary.String(),
	}, "", "  ")
	return atomicfile.WriteFile(filepath.Join(dir, "done.json"), append(marker, '\n'))
}
