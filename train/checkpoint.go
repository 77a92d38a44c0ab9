package train

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/model"
)

// state is the run-level part of a checkpoint (state.json).
type state struct {
	Step       int                           `json:"step"`
	Method     string                        `json:"method"`
	Agents     []string                      `json:"agents"`
	Capability hacpo.CapabilityState         `json:"capability"`
	FirstEval  map[string]map[string]float64 `json:"first_eval,omitempty"`
	LastEval   map[string]map[string]float64 `json:"last_eval,omitempty"`
}

const checkpointPrefix = "step-"

func checkpointDir(out string, step int) string {
	return filepath.Join(out, "checkpoints", fmt.Sprintf("%s%08d", checkpointPrefix, step))
}

// writeDirAtomic builds a directory in a temporary sibling and renames it over
// dst, so dst is either the old complete directory or the new complete one.
func writeDirAtomic(dst string, fill func(tmp string) error) error {
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	old := ""
	if _, err := os.Stat(dst); err == nil {
		old = dst + ".old"
		os.RemoveAll(old)
		if err := os.Rename(dst, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	if old != "" {
		os.RemoveAll(old)
	}
	return syncDir(parent)
}

func syncTree(root string) error {
	return filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// checkpoint saves the whole run after `step` completed steps and prunes old
// checkpoints beyond checkpoint.keep.
func (r *Run) checkpoint(step int) error {
	r.obs.Phase(step, "", "checkpoint")
	dst := checkpointDir(r.cfg.Out, step)
	err := writeDirAtomic(dst, func(tmp string) error {
		for _, a := range r.agents {
			if err := saveAgent(a, filepath.Join(tmp, "agents", a.Name)); err != nil {
				return err
			}
		}
		st := state{Step: step, Method: r.algo.Method, Capability: r.tracker.State(), FirstEval: r.firstEval, LastEval: r.lastEval}
		for _, a := range r.agents {
			st.Agents = append(st.Agents, a.Name)
		}
		crashInCheckpoint(step)
		return writeJSON(filepath.Join(tmp, "state.json"), st)
	})
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	return r.prune()
}

func (r *Run) prune() error {
	all, err := listCheckpoints(r.cfg.Out)
	if err != nil {
		return err
	}
	for len(all) > r.cfg.Checkpoint.Keep {
		if err := os.RemoveAll(all[0]); err != nil {
			return err
		}
		all = all[1:]
	}
	return nil
}

// listCheckpoints returns the complete checkpoints in out, oldest first.
// Temporary directories left by a killed writer are removed.
func listCheckpoints(out string) ([]string, error) {
	dir := filepath.Join(out, "checkpoints")
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, ".tmp-") || strings.HasSuffix(n, ".old"):
			os.RemoveAll(filepath.Join(dir, n))
		case e.IsDir() && strings.HasPrefix(n, checkpointPrefix):
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = filepath.Join(dir, n)
	}
	return names, nil
}

func latestCheckpoint(out string) (string, error) {
	all, err := listCheckpoints(out)
	if err != nil || len(all) == 0 {
		return "", err
	}
	return all[len(all)-1], nil
}

// restore loads a checkpoint into the run's agents and state.
func (r *Run) restore(dir string) error {
	var st state
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("resume: %s: %w", filepath.Join(dir, "state.json"), err)
	}
	if len(st.Agents) != len(r.agents) {
		return fmt.Errorf("resume: checkpoint %s has agents %v, config has %d agents", dir, st.Agents, len(r.agents))
	}
	for i, a := range r.agents {
		if st.Agents[i] != a.Name {
			return fmt.Errorf("resume: checkpoint %s has agent %q at position %d, config has %q", dir, st.Agents[i], i, a.Name)
		}
	}
	if st.Method != r.algo.Method {
		return fmt.Errorf("resume: checkpoint %s was trained with method %q, config says %q", dir, st.Method, r.algo.Method)
	}
	for _, a := range r.agents {
		ad := filepath.Join(dir, "agents", a.Name)
		m, err := model.Load(r.backend, ad)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		a.Model = m
		tr, err := model.NewTrainer(m, optimizerConfig(a.Opt))
		if err != nil {
			return err
		}
		if err := tr.LoadState(ad); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		a.Trainer = tr
	}
	if r.tracker, err = hacpo.RestoreCapabilityTracker(st.Capability); err != nil {
		return fmt.Errorf("resume: %s: capability: %w", dir, err)
	}
	r.start = st.Step
	r.firstEval, r.lastEval = st.FirstEval, st.LastEval
	r.obs.Log(fmt.Sprintf("resumed from %s (step %d)", dir, st.Step))
	return nil
}

// setupReferences gives every agent its frozen reference model: the initial
// weights, saved once in OUT/reference/<agent> so a resumed run uses the same.
func (r *Run) setupReferences(b compute.Backend, resumed bool) error {
	for _, a := range r.agents {
		dir := filepath.Join(r.cfg.Out, "reference", a.Name)
		if resumed {
			if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
				ref, err := model.Load(b, dir)
				if err != nil {
					return fmt.Errorf("reference model of %s: %w", a.Name, err)
				}
				a.Ref = ref
				continue
			}
			return fmt.Errorf("resume: reference model of %s missing in %s", a.Name, dir)
		}
		ref, err := a.Model.Clone()
		if err != nil {
			return err
		}
		if err := writeDirAtomic(dir, ref.Save); err != nil {
			return fmt.Errorf("reference model of %s: %w", a.Name, err)
		}
		a.Ref = ref
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'))
}

// writeResolvedConfig records the config in force (every default filled,
// flags applied) as OUT/config.yaml: ResolvedYAML, which
// `hacrl train --print-defaults` prints.
func writeResolvedConfig(cfg *config.Config) error {
	data, err := ResolvedYAML(cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(cfg.Out, "config.yaml"), data)
}

// CrashEnv names the fault-injection variable of the kill-and-resume test:
// HACRL_CRASH_IN_CHECKPOINT=N makes the process kill itself with SIGKILL in
// the middle of writing the checkpoint of step N (agents written, state not,
// nothing renamed), as a power cut or an OOM kill would.
const CrashEnv = "HACRL_CRASH_IN_CHECKPOINT"

func crashInCheckpoint(step int) {
	if v := os.Getenv(CrashEnv); v != "" && v == strconv.Itoa(step) {
		killSelf()
	}
}
