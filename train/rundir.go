package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/runlock"
)

// An output directory belongs to one run (see Options):
//
//   - the run holds OUT's lock (internal/runlock) from New until Train ends or
//     Close, so a second run pointed at OUT is refused with the holder's pid,
//     host, start time and command line; the kernel drops the lock of a killed
//     process, and the next run takes it over and says so;
//   - a new run (no --resume) starts only in a missing or empty OUT, or with
//     --overwrite, which first deletes what a previous run wrote;
//   - New writes nothing into OUT but the lock until its whole setup (task,
//     agents, checkpoint, evaluation sets) has succeeded, so a run that fails
//     to start leaves an earlier run's files as they were.

// runEntries are the names a run (or an experiment cell, which adds
// cell.yaml, train.log and done.json) writes at the top of its output
// directory. --overwrite empties a directory only when it holds nothing else:
// a directory with other files was not written by hacrl, and deleting it is
// left to the user. A new kind of output at the top of OUT needs a line here.
var runEntries = []string{
	"metrics.jsonl", "config.yaml", "tb", "checkpoints", "final", "reference", "base",
	"plots", "rollouts",
	"mlflow.json",    // the MLflow run it logs to (tracking.go)
	"agents", "nats", // a run of agent processes (hacrl train --processes)
	"cell.yaml", "train.log", "done.json",
	runlock.FileName,
}

// isRunEntry reports whether name is one of runEntries or the temporary file
// of one (atomicfile's ".NAME.tmp-*").
func isRunEntry(name string) bool {
	for _, e := range runEntries {
		if name == e || strings.HasPrefix(name, "."+e+".tmp-") {
			return true
		}
	}
	return false
}

// outContents lists what dir holds, apart from the lock file: names, with a
// trailing "/" for directories.
func outContents(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Name() == runlock.FileName {
			continue
		}
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	return names, nil
}

// describe lists at most six names, then a count of the others.
func describe(names []string) string {
	const most = 6
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// latestStepName is the name of the latest step checkpoint in out, read
// without touching anything ("" if none).
func latestStepName(out string) string {
	entries, _ := os.ReadDir(filepath.Join(out, "checkpoints"))
	last := ""
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), checkpointPrefix) && e.Name() > last {
			last = e.Name()
		}
	}
	return last
}

// checkNewRun refuses a new run (not a resume) in a directory that already
// holds something, unless overwrite is set and the directory looks like a
// run's (only runEntries).
func checkNewRun(out string, overwrite bool) error {
	names, err := outContents(out)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	var foreign []string
	for _, n := range names {
		if !isRunEntry(strings.TrimSuffix(n, "/")) {
			foreign = append(foreign, n)
		}
	}
	if overwrite {
		if len(foreign) > 0 {
			return fmt.Errorf("train: --overwrite: %s holds %s, which a hacrl run does not write; "+
				"--overwrite only empties a run's directory: remove them yourself or choose another directory", out, describe(foreign))
		}
		return nil
	}
	what := describe(names)
	if ck := latestStepName(out); ck != "" {
		what += "; latest checkpoint " + ck
	}
	if len(foreign) == len(names) {
		return fmt.Errorf("train: output directory %s is not empty (it holds %s); choose a new or empty directory", out, what)
	}
	return fmt.Errorf("train: output directory %s already holds a run (%s); continue it with --resume, "+
		"or delete it and start again with --overwrite", out, what)
}

// checkOverwriteTarget refuses --overwrite on a directory that no run should
// be emptying: the file-system root, the home directory, or the working
// directory or any directory that contains it.
func checkOverwriteTarget(out string) error {
	target, err := realPath(out)
	if err != nil {
		return fmt.Errorf("train: --overwrite %s: %w", out, err)
	}
	if filepath.Dir(target) == target {
		return fmt.Errorf("train: --overwrite: refusing to empty %s, the root of a file system", out)
	}
	type place struct{ dir, what string }
	var protected []place
	if home, err := os.UserHomeDir(); err == nil {
		protected = append(protected, place{home, "the home directory"})
	}
	if wd, err := os.Getwd(); err == nil {
		protected = append(protected, place{wd, "the working directory"})
	}
	real := make([]string, len(protected))
	for i, pl := range protected {
		real[i], _ = realPath(pl.dir) // "" when it cannot be resolved
	}
	// Being a protected directory is the more telling reason, so it is
	// checked for all of them before containing one.
	for i, pl := range protected {
		if real[i] != "" && real[i] == target {
			return fmt.Errorf("train: --overwrite: refusing to empty %s, %s", out, pl.what)
		}
	}
	for i, pl := range protected {
		if real[i] == "" {
			continue
		}
		if rel, err := filepath.Rel(target, real[i]); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("train: --overwrite: refusing to empty %s, which contains %s (%s)", out, pl.what, pl.dir)
		}
	}
	return nil
}

// realPath is the absolute path of p with symbolic links resolved, as far as
// p exists (a missing tail is kept as written).
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var missing []string
	for {
		r, err := filepath.EvalSymlinks(abs)
		if err == nil {
			slices.Reverse(missing)
			return filepath.Join(append([]string{r}, missing...)...), nil
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return "", err
		}
		missing = append(missing, filepath.Base(abs))
		abs = parent
	}
}

// keptOnOverwrite are the entries --overwrite leaves: the lock, and the
// config an experiment wrote for its cell (the input of the run, which may be
// the very CONFIG being trained).
var keptOnOverwrite = []string{runlock.FileName, "cell.yaml"}

// clearOut deletes everything in out but keptOnOverwrite. checkNewRun has
// made sure it holds only runEntries. Entries are removed by name inside out,
// and os.RemoveAll deletes a symbolic link itself, never what it points to.
func clearOut(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("train: --overwrite: %w", err)
	}
	for _, e := range entries {
		if slices.Contains(keptOnOverwrite, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("train: --overwrite: %w", err)
		}
	}
	return nil
}

// ClaimOut takes OUT for a run whose agents are separate processes (hacrl
// train --processes), each writing its own run in OUT/agents/<name>: it
// takes OUT's lock and makes the checks New makes of its OUT — a new run
// needs an empty OUT; Overwrite first empties one that holds a run. It
// returns the lock's release.
func ClaimOut(out string, opts Options) (release func() error, err error) {
	if opts.Resume && opts.Overwrite {
		return nil, errors.New("train: --resume continues the run in the output directory and --overwrite deletes it: give one of them")
	}
	r := &Run{cfg: &config.Config{Out: out}, obs: opts.Observer}
	if r.obs == nil {
		r.obs = logObserver{}
	}
	if err := r.lockOutFor(opts, true); err != nil {
		return nil, err
	}
	if opts.Overwrite {
		if err := clearOut(out); err != nil {
			r.lock.Release()
			return nil, err
		}
	}
	return r.lock.Release, nil
}

// checkRunKind refuses to resume, as a run of agent processes (processes)
// or as a run in one process, a run of the other kind in out: the one would
// start from step 0 beside the other's checkpoints and replace its metrics.
func checkRunKind(out string, processes bool) error {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(out, name))
		return err == nil
	}
	switch {
	case processes && exists("checkpoints"):
		return fmt.Errorf("train: %s holds a run trained in one process (%s): resume it without --processes", out, filepath.Join(out, "checkpoints"))
	case !processes && exists("agents") && exists("nats"):
		return fmt.Errorf("train: %s holds a run of agent processes (%s): resume it with --processes --resume", out, filepath.Join(out, "agents"))
	}
	return nil
}

// LatestCheckpoint returns the step of the latest step checkpoint in out,
// read without touching anything; ok is false when there is none.
func LatestCheckpoint(out string) (step int, ok bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(latestStepName(out), checkpointPrefix))
	return n, err == nil
}
