package hacpo

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestPresetsValidate(t *testing.T) {
	names := PresetNames()
	want := []string{"cispo", "dapo", "dr_grpo", "grpo", "gspo", "gspo2x", "hacpo", "hacpo-capable", "naive", "no-adv", "no-cross-clip", "no-omega", "no-stepwise"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("PresetNames = %v", names)
	}
	for _, n := range names {
		s, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Method != n {
			t.Errorf("preset %q has method %q", n, s.Method)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("preset %q: %v", n, err)
		}
		// JSON round trip of the settings (config files, checkpoints).
		data, _ := json.Marshal(s)
		var back Settings
		if err := json.Unmarshal(data, &back); err != nil || back != s {
			t.Errorf("preset %q JSON round trip: %v", n, err)
		}
	}
	if _, err := Preset("ppo"); err == nil || !strings.Contains(err.Error(), "gspo2x") || !strings.Contains(err.Error(), "no-cross-clip") {
		t.Errorf("unknown preset error should list the valid names: %v", err)
	}
	if s, err := Preset(" HACPO "); err != nil || s.Method != "hacpo" {
		t.Errorf("names are case-insensitive: %v", err)
	}
}

// The presets differ from HACPO exactly where the paper's baselines and ablations do.
func TestPresetDefinitions(t *testing.T) {
	h := MustPreset("hacpo")
	if !h.SharesRollouts || h.RatioLevel != SequenceLevel || h.SelfClipLow != 3e-4 || h.SelfClipHigh != 4e-4 ||
		!h.CrossClip || h.CrossDelta != 0.2 || h.CrossDeltaStep != 0.025 || !h.Stepwise || h.Alpha != 1 ||
		!h.CapabilityBaseline || !h.OmegaInUpdate || !h.NormalizeStd || h.AdvantageEpsilon != 1e-6 ||
		!h.UniformFallback || !h.BinaryGuard || h.KLCoef != 0.001 || h.MaxAbsLogRatio != 10 ||
		h.Capability != (CapabilitySettings{Window: 5, Metric: PositiveRate, Floor: 1e-8, RatioMin: 0.1, RatioMax: 10}) {
		t.Errorf("hacpo = %+v", h)
	}
	diff := func(name string, edit func(*Settings)) {
		t.Helper()
		want := h
		edit(&want)
		want.Method = name
		if got := MustPreset(name); got != want {
			t.Errorf("%s = %+v\nwant %+v", name, got, want)
		}
	}
	diff("no-adv", func(s *Settings) { s.CapabilityBaseline = false })
	diff("no-omega", func(s *Settings) { s.OmegaInUpdate = false })
	diff("no-stepwise", func(s *Settings) { s.Stepwise = false })
	diff("no-cross-clip", func(s *Settings) { s.CrossClip, s.Stepwise = false, false })
	diff("hacpo-capable", func(s *Settings) { s.CrossNegativeCapable = true })
	diff("naive", func(s *Settings) {
		s.CrossRule, s.CrossClip, s.Stepwise, s.Alpha = CrossAsSelf, false, false, 0
		s.CapabilityBaseline, s.OmegaInUpdate = false, false
	})
	g := MustPreset("grpo")
	if g.SharesRollouts || g.RatioLevel != TokenLevel || g.SelfClipLow != 0.2 || g.SelfClipHigh != 0.28 || g.DualClip != 0 {
		t.Errorf("grpo = %+v", g)
	}
	// The recipes beyond the paper, each as its source sets it (doc.go decisions 27–30).
	fromGRPO := func(name string, edit func(*Settings)) {
		t.Helper()
		want := g
		edit(&want)
		want.Method = name
		if got := MustPreset(name); got != want {
			t.Errorf("%s = %+v\nwant %+v", name, got, want)
		}
	}
	fromGRPO("dapo", func(s *Settings) {
		s.LossAgg, s.KLCoef = TokenMean, 0
		s.DynamicSampling, s.OverlongPenalty = true, 1
	})
	fromGRPO("dr_grpo", func(s *Settings) {
		s.SelfClipLow, s.SelfClipHigh, s.NormalizeStd, s.LossAgg, s.KLCoef = 0.2, 0.2, false, SeqMeanTokenSumNorm, 0
	})
	fromGRPO("cispo", func(s *Settings) {
		s.SelfRule, s.SelfClipLow, s.SelfClipHigh, s.LossAgg, s.KLCoef = SelfCISPO, 1, 4, TokenMean, 0
	})
	if s := MustPreset("gspo2x"); s.ResponsesMultiplier != 2 || s.SharesRollouts {
		t.Errorf("gspo2x = %+v", s)
	}
	if err := MustPreset("gspo").ValidateAgents(1); err != nil {
		t.Error(err)
	}
	if err := h.ValidateAgents(1); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("hacpo with one agent: %v", err)
	}
	if err := h.ValidateAgents(3); err != nil {
		t.Error(err)
	}
}

func TestSettingsValidateErrors(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*Settings)
	}{
		{"responses_multiplier", func(s *Settings) { s.ResponsesMultiplier = 0 }},
		{"ratio_level", func(s *Settings) { s.RatioLevel = "word" }},
		{"shared rollouts", func(s *Settings) { s.RatioLevel = TokenLevel }},
		{"self_clip_low", func(s *Settings) { s.SelfClipLow = 1 }},
		{"self_clip_high", func(s *Settings) { s.SelfClipHigh = math.NaN() }},
		{"dual_clip", func(s *Settings) { s.DualClip = 0.5 }},
		{"dual_clip applies", func(s *Settings) { s.DualClip = 3 }},
		{"max_abs_log_ratio", func(s *Settings) { s.MaxAbsLogRatio = 0 }},
		{"cross_rule", func(s *Settings) { s.CrossRule = "x" }},
		{"cross_delta", func(s *Settings) { s.CrossDelta = 1.2 }},
		{"cross_delta_step", func(s *Settings) { s.CrossDeltaStep = -0.1 }},
		{"alpha", func(s *Settings) { s.Alpha = -1 }},
		{"advantage_epsilon", func(s *Settings) { s.AdvantageEpsilon = 0 }},
		{"kl_coef", func(s *Settings) { s.KLCoef = -1 }},
		{"capability window", func(s *Settings) { s.Capability.Window = 0 }},
		{"capability metric", func(s *Settings) { s.Capability.Metric = "acc" }},
		{"capability floor", func(s *Settings) { s.Capability.Floor = 0 }},
		{"warmup_steps", func(s *Settings) { s.Capability.WarmupSteps = -1 }},
		{"self_rule", func(s *Settings) { s.SelfRule = "ppo2" }},
		{"loss_agg", func(s *Settings) { s.LossAgg = "sum" }},
		{"fixes the loss aggregation", func(s *Settings) { s.Semantics, s.LossAgg = SemanticsOriginal, TokenMean }},
		{"loss_agg_tokens", func(s *Settings) { s.LossAggTokens = -1 }},
		{"advantage_std", func(s *Settings) { s.AdvantageStd = "global" }},
		{"kl_estimator", func(s *Settings) { s.KLEstimator = "k4" }},
		{"kl_in_reward", func(s *Settings) { s.KLInReward = true }},
		{"entropy_coef", func(s *Settings) { s.EntropyCoef = -0.01 }},
		{"overlong_buffer", func(s *Settings) { s.OverlongPenalty = math.Inf(1) }},
		{"max_sample_rounds", func(s *Settings) { s.DynamicSampling, s.MaxSampleRounds = true, 0 }},
		{"reward range", func(s *Settings) { s.RewardMax = 0 }},
		{"capability reward_min", func(s *Settings) { s.RewardMin = -1 }},
		{"capability success", func(s *Settings) { s.Capability.Success = math.NaN() }},
	}
	for _, c := range cases {
		s := MustPreset("hacpo")
		c.edit(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), `"hacpo"`) {
			t.Errorf("%s: error %v", c.field, err)
		}
	}
	n := MustPreset("naive")
	n.Alpha = 1
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "alpha") {
		t.Errorf("naive with alpha: %v", err)
	}
	g := MustPreset("grpo")
	for _, c := range []struct {
		field string
		edit  func(*Settings)
	}{
		{"kl_in_reward has no effect", func(s *Settings) { s.KLInReward, s.KLCoef = true, 0 }},
		{"dual_clip caps", func(s *Settings) { s.SelfRule, s.DualClip = SelfCISPO, 3 }},
		{"self_clip_low", func(s *Settings) { s.SelfClipLow = 1 }}, // no lower bound: CISPO only
	} {
		s := g
		c.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("grpo, %s: error %v", c.field, err)
		}
	}
	if err := (Settings{}).Validate(); err == nil {
		t.Error("zero settings should not validate")
	}
}
