package train

import (
	"encoding/json"
	"errors"
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
	"github.com/hacrl/hacrl/internal/checksum"
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
	// FirstEvalStep and LastEvalStep are the steps of FirstEval and LastEval
	// (absent in checkpoints written before they were recorded).
	FirstEvalStep *int `json:"first_eval_step,omitempty"`
	LastEvalStep  *int `json:"last_eval_step,omitempty"`
	// Config is the training-relevant part of the config that wrote the
	// checkpoint (trainingConfig), ConfigHash its hash: --resume refuses a
	// config that differs. Absent in checkpoints written before they were
	// recorded; such a checkpoint resumes with a warning.
	ConfigHash string          `json:"config_hash,omitempty"`
	Config     json.RawMessage `json:"config,omitempty"`
	// Metrics identifies the records of OUT/metrics.jsonl written up to the
	// checkpoint, which a resume keeps: --resume refuses a file whose
	// records differ, naming the line. Absent in checkpoints written before
	// it was recorded.
	Metrics *metricsPrefix `json:"metrics,omitempty"`
}

// withChecksums is fill followed by writing the manifest of the directory
// it filled (internal/checksum), for atomicfile.WriteDir: every directory a
// run writes whole — a checkpoint, a final agent, a reference model, a
// LoRA agent's base — carries its checksums.json, checked when it is
// loaded.
func withChecksums(fill func(tmp string) error) func(tmp string) error {
	return func(tmp string) error {
		if err := fill(tmp); err != nil {
			return err
		}
		return checksum.Write(tmp)
	}
}

// verifyDir checks dir against its checksums.json, when it has one (a
// directory without one, such as a Hugging Face download, loads unchecked).
func verifyDir(dir string) error {
	_, err := checksum.Verify(dir)
	return err
}

const checkpointPrefix = "step-"

func checkpointDir(out string, step int) string {
	return filepath.Join(out, "checkpoints", fmt.Sprintf("%s%08d", checkpointPrefix, step))
}

// checkpoint saves the whole run after `step` completed steps and prunes old
// checkpoints beyond checkpoint.keep.
func (r *Run) checkpoint(step int) error {
	r.obs.Phase(step, "", "checkpoint")
	dst := checkpointDir(r.cfg.Out, step)
	err := atomicfile.WriteDir(dst, withChecksums(func(tmp string) error {
		for _, a := range r.agents {
			ad := filepath.Join(tmp, "agents", a.Name)
			if err := saveAgent(a, ad, true); err != nil {
				return err
			}
			if err := checksum.Write(ad); err != nil { // each agent directory can be checked, and loaded, alone
				return fmt.Errorf("agent %s: %w", a.Name, err)
			}
		}
		mp, err := readMetricsPrefix(r.cfg.Out)
		if err != nil {
			return err
		}
		st := state{Step: step, Method: r.algo.Method, Capability: r.tracker.State(), FirstEval: r.firstEval, LastEval: r.lastEval,
			ConfigHash: configHash(r.trainCfg), Config: r.trainCfg, Metrics: mp}
		if r.firstEvalStep >= 0 {
			st.FirstEvalStep, st.LastEvalStep = &r.firstEvalStep, &r.lastEvalStep
		}
		for _, a := range r.agents {
			st.Agents = append(st.Agents, a.Name)
		}
		crashInCheckpoint(step)
		return writeJSON(filepath.Join(tmp, "state.json"), st)
	}))
	if err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", step, err)
	}
	return r.prune(step)
}

// prune deletes the oldest checkpoints up to step beyond checkpoint.keep.
// Checkpoints after step (none, unless a damaged one was left in place) are
// not counted, so that pruning never deletes the checkpoint just written.
func (r *Run) prune(step int) error {
	all, err := listCheckpoints(r.cfg.Out)
	if err != nil {
		return err
	}
	last := filepath.Base(checkpointDir(r.cfg.Out, step))
	for len(all) > 0 && filepath.Base(all[len(all)-1]) > last {
		all = all[:len(all)-1]
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
// Temporary directories left by a killed writer are removed; a checkpoint
// that a killed writer had moved aside to replace it (NAME.old without NAME)
// is put back.
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
		case strings.HasSuffix(n, ".old") && strings.HasPrefix(n, checkpointPrefix):
			orig := strings.TrimSuffix(n, ".old")
			if _, err := os.Stat(filepath.Join(dir, orig)); errors.Is(err, os.ErrNotExist) {
				if os.Rename(filepath.Join(dir, n), filepath.Join(dir, orig)) == nil {
					names = append(names, orig)
				}
				continue
			}
			os.RemoveAll(filepath.Join(dir, n))
		case strings.HasPrefix(n, ".tmp-"):
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

// loaded is a checkpoint read into memory, not yet applied to the run.
type loaded struct {
	dir      string
	st       state
	models   []*model.Model
	trainers []*model.Trainer
	tracker  *hacpo.CapabilityTracker
}

// mismatchError is a checkpoint that is intact but was written by another
// run: other agents, another method or another training config. Resuming
// from an older checkpoint of the same directory would not help.
type mismatchError struct{ error }

func (e mismatchError) Unwrap() error { return e.error }

// findCheckpoint reads the latest intact checkpoint in OUT. A damaged one
// (unreadable state.json, missing or damaged agent files, any file that
// differs from its checksums.json) is reported
// through the observer and the previous one tried; its path is added to
// r.damaged. It returns nil when OUT has no checkpoint, and an error when
// none is intact or the latest intact one belongs to another config.
func (r *Run) findCheckpoint() (*loaded, error) {
	all, err := listCheckpoints(r.cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	var problems []string
	for i := len(all) - 1; i >= 0; i-- {
		l, err := r.readCheckpoint(all[i])
		var mismatch mismatchError
		switch {
		case err == nil:
			if len(problems) > 0 {
				r.obs.Log(fmt.Sprintf("resume: falling back to %s, the latest intact checkpoint", all[i]))
			}
			if err := r.checkMetrics(l); err != nil { // no earlier checkpoint helps: it covers the same records
				return nil, err
			}
			return l, nil
		case errors.As(err, &mismatch):
			return nil, err
		}
		r.obs.Log(fmt.Sprintf("resume: checkpoint %s is damaged: %v", all[i], err))
		problems = append(problems, fmt.Sprintf("%s: %v", filepath.Base(all[i]), err))
		r.damaged = append(r.damaged, all[i])
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("resume: no intact checkpoint in %s:\n  %s", filepath.Join(r.cfg.Out, "checkpoints"), strings.Join(problems, "\n  "))
	}
	return nil, nil
}

// readCheckpoint reads and checks one checkpoint directory.
func (r *Run) readCheckpoint(dir string) (*loaded, error) {
	l := &loaded{dir: dir}
	st := &l.st
	path := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Every file of the checkpoint, whether this resume reads it or a
	// later eval of the run's agents will (the tokenizer files), against
	// the manifest written with it: a changed byte sets it aside.
	found, err := checksum.Verify(dir)
	if err != nil {
		return nil, err
	}
	if !found {
		r.obs.Log(fmt.Sprintf("resume: warning: checkpoint %s has no %s (written before checksums were); its files are not checked", dir, checksum.FileName))
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if name := filepath.Base(dir); name != filepath.Base(checkpointDir("", st.Step)) {
		return nil, fmt.Errorf("%s: step %d does not match the directory name %s", path, st.Step, name)
	}
	if err := r.checkIdentity(dir, st); err != nil {
		return nil, mismatchError{err}
	}
	for _, a := range r.agents {
		ad := filepath.Join(dir, "agents", a.Name)
		m, err := loadCheckpointModel(r.backend, a, ad)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		tr, err := model.NewTrainer(m, optimizerConfig(a.Opt))
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if err := tr.LoadState(ad); err != nil {
			return nil, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		l.models = append(l.models, m)
		l.trainers = append(l.trainers, tr)
	}
	if l.tracker, err = hacpo.RestoreCapabilityTracker(st.Capability); err != nil {
		return nil, fmt.Errorf("%s: capability: %w", path, err)
	}
	return l, nil
}

// loadCheckpointModel reads agent a's model from its directory ad in a
// checkpoint: the whole model, or for a LoRA agent the saved adapters on
// a's frozen base, replacing a's adapters in place (the base never changes
// in training, and its one copy is a's).
func loadCheckpointModel(b compute.Backend, a *Agent, ad string) (*model.Model, error) {
	if !a.isLoRA() {
		return model.Load(b, ad)
	}
	if err := a.Model.LoadAdapters(ad); err != nil {
		return nil, err
	}
	return a.Model, nil
}

// checkIdentity checks that a checkpoint was written by this run's config:
// the same agents in the same order, the same method, and the same
// training-relevant config (resumeMayChange lists what may differ).
func (r *Run) checkIdentity(dir string, st *state) error {
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
	if err := r.checkTemplates(dir); err != nil {
		return err
	}
	if st.ConfigHash == "" {
		r.obs.Log(fmt.Sprintf("resume: warning: checkpoint %s predates config hashes; cannot check that this config is the one that wrote it", dir))
		return nil
	}
	if st.ConfigHash == configHash(r.trainCfg) {
		return nil
	}
	diff, err := configDiff(st.Config, r.trainCfg)
	if err != nil || len(diff) == 0 {
		diff = []string{fmt.Sprintf("config hash: checkpoint %s, config %s", st.ConfigHash, configHash(r.trainCfg))}
	}
	return fmt.Errorf("resume: the config is not the one that wrote checkpoint %s:\n  %s\n"+
		"only %s may change on --resume; train with the original config, or start a new run (another directory, or --overwrite)",
		dir, strings.Join(diff, "\n  "), strings.Join(resumeMayChange, ", "))
}

// checkTemplates checks that each agent prompts with the template kind and
// system text it was trained with (its agent.json in the checkpoint). The
// config hash cannot see this where the config leaves the kind to the
// agent's checkpoint, whose template (or default, see DefaultTemplateKind)
// may have changed since.
func (r *Run) checkTemplates(dir string) error {
	for _, a := range r.agents {
		ad := filepath.Join(dir, "agents", a.Name)
		saved, found, err := readMeta(ad)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if !found {
			continue
		}
		if saved.Template.Kind != a.Template.Kind || saved.Template.System != a.Template.System {
			return fmt.Errorf("resume: agent %s of checkpoint %s was trained with template kind %s (system %q), the config gives it kind %s (system %q): "+
				"set agents[%d].template to what %s says to resume",
				a.Name, dir, saved.Template.Kind, saved.Template.System, a.Template.Kind, a.Template.System, a.Index, filepath.Join(ad, "agent.json"))
		}
	}
	return nil
}

// restore applies a loaded checkpoint to the run's agents and state.
func (r *Run) restore(l *loaded) {
	for i, a := range r.agents {
		a.Model, a.Trainer = l.models[i], l.trainers[i]
	}
	r.tracker = l.tracker
	r.start = l.st.Step
	r.firstEval, r.lastEval = l.st.FirstEval, l.st.LastEval
	r.firstEvalStep, r.lastEvalStep = -1, -1
	if l.st.FirstEvalStep != nil && l.st.LastEvalStep != nil {
		r.firstEvalStep, r.lastEvalStep = *l.st.FirstEvalStep, *l.st.LastEvalStep
	}
	r.obs.Log(fmt.Sprintf("resumed from %s (step %d)", l.dir, l.st.Step))
}

// setAsideDamaged renames the damaged checkpoints found on resume to
// damaged-step-NNNNNNNN (kept for inspection, no longer counted as
// checkpoints), so that the resumed run's own checkpoints take their place.
func (r *Run) setAsideDamaged() error {
	for _, dir := range r.damaged {
		dst := filepath.Join(filepath.Dir(dir), "damaged-"+filepath.Base(dir))
		for i := 2; ; i++ {
			if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
				break
			}
			dst = filepath.Join(filepath.Dir(dir), fmt.Sprintf("damaged-%s-%d", filepath.Base(dir), i))
		}
		if err := os.Rename(dir, dst); err != nil {
			return fmt.Errorf("resume: setting aside the damaged checkpoint: %w", err)
		}
		r.obs.Log(fmt.Sprintf("resume: moved the damaged checkpoint %s to %s", dir, dst))
	}
	return nil
}

// setupReferences gives every agent its frozen reference model: the initial
// weights, saved once in OUT/reference/<agent> (by saveReferences, when the
// run's setup has succeeded) so a resumed run uses the same.
func (r *Run) setupReferences(b compute.Backend, resumed bool) error {
	for _, a := range r.agents {
		if a.isLoRA() { // the frozen base is the reference: no copy, nothing saved
			a.Ref = a.Model.Base()
			continue
		}
		dir := filepath.Join(r.cfg.Out, "reference", a.Name)
		if resumed {
			if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
				if err := verifyDir(dir); err != nil {
					return fmt.Errorf("resume: reference model of %s: %w", a.Name, err)
				}
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
		a.Ref = ref
	}
	return nil
}

// saveReferences writes the reference models of a new run (a LoRA agent's
// is its base, which needs no copy).
func (r *Run) saveReferences() error {
	for _, a := range r.agents {
		if a.isLoRA() {
			continue
		}
		dir := filepath.Join(r.cfg.Out, "reference", a.Name)
		if err := atomicfile.WriteDir(dir, withChecksums(a.Ref.Save)); err != nil {
			return fmt.Errorf("reference model of %s: %w", a.Name, err)
		}
	}
	return nil
}

// baseDir is where a run saves the base of a LoRA agent made from a new
// model (a checkpoint's base is the checkpoint itself).
func baseDir(out, agent string) string { return filepath.Join(out, "base", agent) }

// saveBases writes, once, the base of every LoRA agent made from a new
// model into baseDir, with the agent's tokenizer, so that its adapter files
// (whose base_model_name_or_path names it) load in hacrl eval, generate,
// score and merge, and in PEFT.
func (r *Run) saveBases() error {
	for _, a := range r.agents {
		dir := baseDir(r.cfg.Out, a.Name)
		if !a.isLoRA() || r.cfg.Agents[a.Index].Checkpoint != "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
			continue
		}
		err := atomicfile.WriteDir(dir, withChecksums(func(tmp string) error {
			if err := a.Model.Base().Save(tmp); err != nil {
				return err
			}
			if err := a.Tok.Save(filepath.Join(tmp, "tokenizer.json")); err != nil {
				return err
			}
			return saveTemplateFiles(a, tmp)
		}))
		if err != nil {
			return fmt.Errorf("base model of %s: %w", a.Name, err)
		}
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
