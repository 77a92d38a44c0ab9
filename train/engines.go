package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rolloutengine"
)

// sampler is the engine that samples the agent's rollouts: its own model
// in-process unless its config names a server.
func (a *Agent) sampler() rolloutengine.Engine {
	if a.rollout != nil {
		return a.rollout
	}
	return rolloutengine.Local{Model: a.Model}
}

// setupRolloutEngines gives every agent whose rollout section names a
// server its client. It makes no request: the first push (pushWeights at
// the start of Train) is the first contact.
func (r *Run) setupRolloutEngines() error {
	for _, a := range r.agents {
		i := a.Index
		rc := r.cfg.Agents[i].Rollout
		if !rc.Remote() {
			continue
		}
		key := ""
		if rc.APIKeyEnv != "" {
			if key = os.Getenv(rc.APIKeyEnv); key == "" {
				return fmt.Errorf("%s: environment variable %s is not set", r.cfg.Where(fmt.Sprintf("agents[%d].rollout.api_key_env", i)), rc.APIKeyEnv)
			}
		}
		dir := rc.WeightsDir
		if dir == "" {
			dir = rolloutWeightsDir(r.cfg.Out, a.Name)
		}
		mc := a.Model.Config()
		c, err := rolloutengine.New(rolloutengine.Config{
			Agent: a.Name, URL: rc.URL, Dialect: rc.Dialect, Model: rc.Model, APIKey: key, WeightsDir: dir,
			Timeout: rc.TimeoutDuration(), Concurrency: rc.Concurrency, Retries: *rc.Retries, MaxStaleRetries: *rc.MaxStaleRetries,
			MaxSeq: mc.MaxSeq, Vocab: mc.Vocab,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", r.cfg.Where(fmt.Sprintf("agents[%d].rollout", i)), err)
		}
		a.rollout = c
		a.pushAdapters = a.isLoRA() && rc.Dialect == rolloutengine.Hacrl
	}
	return nil
}

// rolloutWeightsDir is the default weights_dir of an agent sampling
// through SGLang or hacrl serve.
func rolloutWeightsDir(out, agent string) string {
	return filepath.Join(out, "rollout-weights", agent)
}

// pushWeights pushes agent a's weights after done steps to its server,
// labelled with the version done (nothing for an in-process agent), and
// records the time in v when v is not nil.
func (r *Run) pushWeights(ctx context.Context, a *Agent, done int, v map[string]float64) error {
	s, ok := a.rollout.(rolloutengine.Syncer)
	if !ok {
		return nil
	}
	r.obs.Phase(done, a.Name, "push weights")
	t0 := time.Now()
	if err := s.Push(ctx, strconv.Itoa(done), func(dir string) error { return saveForServer(a, dir) }); err != nil {
		return fmt.Errorf("step %d: agent %s: %w", done, a.Name, err)
	}
	if v != nil {
		v["time/weight_sync"] = time.Since(t0).Seconds()
	}
	return nil
}

// saveForServer writes agent a as the Hugging Face checkpoint an inference
// server loads: the weights in float32 (config.json keeps the model's
// dtype, so a server may cast them), the tokenizer and tokenizer_config.
// A LoRA agent is saved with its adapters merged into a copy of its
// weights: every server's full-weight reload takes that, and none needs
// LoRA support or a second model name; the copy lives only while it is
// written. For hacrl serve, which loads an adapter directory onto the
// base it serves, a LoRA agent writes its adapters alone (PEFT's files,
// megabytes instead of the whole model, and no copy).
func saveForServer(a *Agent, dir string) error {
	if a.pushAdapters {
		return a.Model.SaveAdapters(dir, a.BaseDir)
	}
	m := a.Model
	if a.isLoRA() {
		c, err := a.Model.Clone()
		if err != nil {
			return err
		}
		if err := c.MergeLoRA(); err != nil {
			return err
		}
		m = c
	}
	if err := m.SaveWith(dir, model.SaveOptions{Exact: true}); err != nil {
		return err
	}
	if err := a.Tok.Save(filepath.Join(dir, "tokenizer.json")); err != nil {
		return err
	}
	return saveTemplateFiles(a, dir)
}

// weightVersionMetrics records into v the weight version agent a's samples
// were drawn with and how many were sampled again for stale weights, and
// reports whether a samples through a server.
func weightVersionMetrics(a *Agent, samples []rolloutengine.Sample, v map[string]float64) bool {
	if _, ok := a.rollout.(rolloutengine.Syncer); !ok || len(samples) == 0 {
		return false
	}
	resampled := 0
	for _, s := range samples {
		resampled += s.Resampled
	}
	v["rollout/resampled_stale"] = float64(resampled)
	if n, err := strconv.Atoi(samples[0].WeightVersion); err == nil {
		v["rollout/weight_version"] = float64(n)
	}
	return true
}

// samplerDiffers reports whether agent a's responses are drawn by something
// other than the trainer's float32 weights — an inference server, or
// bfloat16 sampling weights — whose log-probs then differ from the old
// log-probs (rollout/logprob_abs_diff) and which the rollout correction
// (method.rollout_is) weighs.
func (a *Agent) samplerDiffers() bool {
	_, remote := a.rollout.(rolloutengine.Syncer)
	return remote || a.Model.SampleDType() == model.WeightsBFloat16
}

// logProbDiff is the mean absolute difference, per token, between the
// log-probs a server reported for its responses and the trainer's own
// (the old log-probs the method uses): 0 when both compute alike; a
// server's other kernels, dtype or logprobs mode show here.
func logProbDiff(served, own [][]float32) float64 {
	var sum float64
	var n int
	for i := range served {
		for t := range min(len(served[i]), len(own[i])) {
			sum += math.Abs(float64(served[i][t]) - float64(own[i][t]))
			n++
		}
	}
	return sum / math.Max(float64(n), 1)
}
