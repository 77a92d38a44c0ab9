package train

import (
	"bytes"
	"fmt"
	"os"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/task"
)

// Resolve returns a copy of cfg with every default filled in: those of the
// config package (config.Parse applies them) and those that live elsewhere —
// the method preset's hyperparameters, the generated task's options, the
// template of each agent from a checkpoint that gives none (the one in the
// checkpoint's agent.json; without one, the checkpoint's own chat template,
// kind hf, when its tokenizer files carry one, else plain) and the compute
// backend. Written with
// config.Marshal (see ResolvedYAML), it reads back as the same config.
func Resolve(cfg *config.Config) (*config.Config, error) {
	r := cfg.Clone()
	s, err := methodSettings(r)
	if err != nil {
		return nil, err
	}
	m := &r.Method
	m.Alpha, m.Delta, m.DeltaStep = ptr(s.Alpha), ptr(s.CrossDelta), ptr(s.CrossDeltaStep)
	m.ClipLow, m.ClipHigh, m.KLCoef = ptr(s.SelfClipLow), ptr(s.SelfClipHigh), ptr(s.KLCoef)
	m.Window, m.WarmupSteps = ptr(s.Capability.Window), ptr(s.Capability.WarmupSteps)
	m.NormalizeStd = ptr(s.NormalizeStd)
	m.OmegaMin, m.OmegaMax = ptr(s.Capability.RatioMin), ptr(s.Capability.RatioMax)
	resolveOptions(m, s)
	if r.Task != nil {
		tk, err := newTask(r.Task)
		if err != nil {
			return nil, taskError(r, "task", err)
		}
		if t, ok := tk.(interface{ Options() task.Options }); ok {
			o := t.Options()
			r.Task.Seed, r.Task.FormatWeight = o.Seed, o.FormatWeight
			r.Task.Digits, r.Task.Ops, r.Task.Operators, r.Task.MulDigits = o.Digits, o.Ops, o.Operators, o.MulDigits
			r.Task.Numbers, r.Task.MaxNumber, r.Task.MaxTarget, r.Task.Fractions = o.Numbers, o.MaxNumber, o.MaxTarget, o.Fractions
		}
	}
	for i := range r.Agents {
		a := &r.Agents[i]
		if a.Template.Kind != "" || a.Checkpoint == "" {
			continue
		}
		// The template comes from the checkpoint: it must be here.
		if err := ModelDirError(r.Where(fmt.Sprintf("agents[%d].checkpoint", i)), a.Checkpoint); err != nil {
			return nil, err
		}
		t, _, err := AgentTemplate(a.Template, a.Checkpoint, a.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("%s (agent %s): %w", r.Where(fmt.Sprintf("agents[%d].checkpoint", i)), a.Name, err)
		}
		a.Template.Kind, a.Template.System, a.Template.Vars = t.Kind, t.System, t.Vars
	}
	if r.Backend == "" {
		r.Backend = backend.Default
	}
	return r, nil
}

// resolveOptions fills the method keys beyond the paper's hyperparameters
// (hacpo/doc.go decisions 27–31) from the settings s they resolve to. A key
// that does not apply stays unset: loss_agg under the original semantics
// (which fixes the aggregation), and overlong_buffer while the config has
// no agent to derive it from.
func resolveOptions(m *config.Method, s hacpo.Settings) {
	if !s.IsOriginal() {
		m.LossAgg = ptr(string(s.Aggregation()))
	}
	std := "none"
	if s.NormalizeStd {
		std = string(hacpo.GroupStd)
		if s.AdvantageStd != "" {
			std = string(s.AdvantageStd)
		}
	}
	m.AdvantageStd = &std
	rule := hacpo.SelfPPO
	if s.SelfRule != "" {
		rule = s.SelfRule
	}
	m.SelfRule = ptr(string(rule))
	est := hacpo.KLK3
	if s.KLEstimator != "" {
		est = s.KLEstimator
	}
	m.KLEstimator = ptr(string(est))
	m.KLInReward, m.EntropyCoef, m.MaskTruncated = ptr(s.KLInReward), ptr(s.EntropyCoef), ptr(s.MaskTruncated)
	m.OverlongPenalty, m.DynamicSampling = ptr(s.OverlongPenalty), ptr(s.DynamicSampling)
	if s.OverlongBuffer > 0 {
		m.OverlongBuffer = ptr(s.OverlongBuffer)
	}
	m.MaxSampleRounds = ptr(s.MaxSampleRounds)
	m.RolloutIS, m.RolloutISCap = ptr(string(s.RolloutIS)), ptr(s.RolloutISCap)
	switch {
	case s.CrossPositiveOnly:
		m.CrossAdvantage = "positive"
	case s.CrossNegativeCapable:
		m.CrossAdvantage = "capable"
	default:
		m.CrossAdvantage = "all"
	}
}

// ResolvedYAML is the resolved config (see Resolve) as YAML: what
// `hacrl train --print-defaults` prints and OUT/config.yaml holds. A config
// with overrides (cfg.Sets) starts with a comment that lists them, as flags
// to paste into a shell; their values are in the YAML already.
func ResolvedYAML(cfg *config.Config) ([]byte, error) {
	r, err := Resolve(cfg)
	if err != nil {
		return nil, err
	}
	data, err := config.Marshal(r)
	if err != nil || len(cfg.Sets) == 0 {
		return data, err
	}
	var b bytes.Buffer
	b.WriteString("# The config file with these overrides from the command line (their values are below):\n")
	for _, s := range cfg.Sets {
		fmt.Fprintf(&b, "#   %s\n", config.SetFlag(s))
	}
	b.Write(data)
	return b.Bytes(), nil
}

func ptr[T any](v T) *T { return &v }

// checkModelDirs checks that every agent's checkpoint is a directory here
// (see ModelDirError) and its tokenizer, when given, a file, naming the key
// and its line.
func checkModelDirs(cfg *config.Config) error {
	for i, a := range cfg.Agents {
		if a.Checkpoint != "" {
			if err := ModelDirError(cfg.Where(fmt.Sprintf("agents[%d].checkpoint", i)), a.Checkpoint); err != nil {
				return err
			}
		}
		if a.Tokenizer != "" {
			if st, err := os.Stat(a.Tokenizer); err != nil || st.IsDir() {
				return fmt.Errorf("%s: no file %s (want a tokenizer.json)", cfg.Where(fmt.Sprintf("agents[%d].tokenizer", i)), a.Tokenizer)
			}
		}
	}
	return nil
}
