package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/safetensors"
)

// Checkpoint file names inside a model directory.
const (
	ConfigFile    = "config.json"
	WeightsFile   = "model.safetensors"
	OptimizerFile = "optimizer.safetensors"
)

// Save writes config.json and model.safetensors (float32, Hugging Face tensor
// names) into dir, creating it if needed. Each file is replaced atomically; to
// replace a whole checkpoint at once, save into a temporary directory and
// rename it.
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	if err := m.cfg.WriteJSON(filepath.Join(dir, ConfigFile)); err != nil {
		return err
	}
	path := filepath.Join(dir, WeightsFile)
	if err := safetensors.Write(path, m.named(m.snapshot()), map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	return nil
}

// named returns the tensors keyed by parameter name, as float32.
func (m *Model) named(values []*tensors.Tensor) map[string]safetensors.Tensor {
	out := make(map[string]safetensors.Tensor, len(values))
	for i, s := range m.specs {
		v := float32s(values[i])
		if s.transposed {
			v = transpose(v, s.shape[0], s.shape[1])
		}
		out[s.name] = safetensors.FromFloat32(s.fileShape(), v)
	}
	return out
}

// Load reads a model saved by Save, or a Hugging Face GPT-2, Llama or Qwen2
// checkpoint with the same layout: dir/config.json and dir/model.safetensors
// (F32, F16, BF16 or F64 tensors; GPT-2's "transformer." prefix is accepted,
// and tensors the model does not use are ignored). Errors name the file and
// the tensor or field at fault; a NaN or infinite weight is refused.
func Load(b compute.Backend, dir string) (*Model, error) {
	cfg, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	m := blankModel(b, cfg, dtypes.Float32)
	path := filepath.Join(dir, WeightsFile)
	ts, _, err := safetensors.Read(path)
	if err != nil {
		return nil, fmt.Errorf("model: load: %w", err)
	}
	values, err := decodeParams(path, ts, m.specs, func(name string) []string {
		if cfg.Family == "gpt" {
			return []string{name, "transformer." + name}
		}
		return []string{name}
	})
	if err != nil {
		return nil, err
	}
	copy(m.params, values)
	return m, nil
}

// decodeParams converts one tensor per spec of the file at path to float32,
// looking each up under the names aliases returns for the spec's name.
func decodeParams(path string, ts map[string]safetensors.Tensor, specs []paramSpec, aliases func(string) []string) ([]*tensors.Tensor, error) {
	var err error
	out := make([]*tensors.Tensor, len(specs))
	for i, s := range specs {
		var t safetensors.Tensor
		found := false
		for _, name := range aliases(s.name) {
			if t, found = ts[name]; found {
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("model: load %s: tensor %q is missing", path, aliases(s.name)[0])
		}
		if !slices.Equal(t.Shape, s.fileShape()) {
			return nil, fmt.Errorf("model: load %s: tensor %q has shape %v, want %v%s", path, aliases(s.name)[0], t.Shape, s.fileShape(), s.originNote())
		}
		var v []float32
		switch t.DType {
		case "F32", "F16", "BF16":
			v, err = t.Float32s()
		case "F64":
			var w []float64
			if w, err = t.Float64s(); err == nil {
				v = make([]float32, len(w))
				for j, x := range w {
					v[j] = float32(x)
				}
			}
		default:
			err = fmt.Errorf("dtype %s, want F32, F16, BF16 or F64", t.DType)
		}
		if err == nil {
			err = checkFinite(v)
		}
		if err != nil {
			return nil, fmt.Errorf("model: load %s: tensor %q: %w", path, aliases(s.name)[0], err)
		}
		if s.transposed {
			v = transpose(v, s.shape[1], s.shape[0])
		}
		out[i] = tensors.FromFlatDataAndDimensions(v, s.shape...)
	}
	return out, nil
}

// checkFinite reports the first NaN or infinite value of v (a float64
// value too large for float32 arrives here as infinite): weights and
// optimizer moments must be finite, and one such value would make every
// forward pass through it non-finite.
func checkFinite(v []float32) error {
	for i, x := range v {
		if x-x != 0 { // NaN and ±Inf, in one comparison
			return fmt.Errorf("element %d is %v; a checkpoint must hold finite values", i, x)
		}
	}
	return nil
}

// transpose returns the row-major rows×cols matrix v transposed.
func transpose(v []float32, rows, cols int) []float32 {
	t := make([]float32, len(v))
	for r := range rows {
		for c := range cols {
			t[c*rows+r] = v[r*cols+c]
		}
	}
	return t
}

// Optimizer state file layout: "exp_avg.<param>" and "exp_avg_sq.<param>"
// tensors and the step count in the metadata.
const (
	momentPrefix   = "exp_avg."
	velocityPrefix = "exp_avg_sq."
	stepKey        = "step"
)

// SaveState writes the optimizer state (Adam moments and step count) to
// dir/optimizer.safetensors, atomically. The accumulated gradient is not
// saved.
func (t *Trainer) SaveState(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: save optimizer state: %w", err)
	}
	all := map[string]safetensors.Tensor{}
	for name, x := range t.m.named(t.mom) {
		all[momentPrefix+name] = x
	}
	for name, x := range t.m.named(t.vel) {
		all[velocityPrefix+name] = x
	}
	meta := map[string]string{
		stepKey: strconv.FormatInt(t.step, 10),
		"beta1": fmt.Sprint(t.opt.Beta1), "beta2": fmt.Sprint(t.opt.Beta2), "epsilon": fmt.Sprint(t.opt.Epsilon),
		"weight_decay": fmt.Sprint(t.opt.WeightDecay), "max_grad_norm": fmt.Sprint(t.opt.MaxGradNorm),
	}
	if err := safetensors.Write(filepath.Join(dir, OptimizerFile), all, meta); err != nil {
		return fmt.Errorf("model: save optimizer state: %w", err)
	}
	return nil
}

// LoadState restores the optimizer state written by SaveState and clears the
// accumulated gradient. A NaN or infinite moment is refused, naming its tensor.
func (t *Trainer) LoadState(dir string) error {
	if t.m.dtype != dtypes.Float32 {
		return errors.New("model: load optimizer state: only float32 models")
	}
	path := filepath.Join(dir, OptimizerFile)
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return fmt.Errorf("model: load optimizer state: %w", err)
	}
	step, err := strconv.ParseInt(meta[stepKey], 10, 64)
	if err != nil || step < 0 {
		return fmt.Errorf("model: load optimizer state %s: metadata %q is %q, want a step count", path, stepKey, meta[stepKey])
	}
	mom, err := decodeParams(path, ts, t.m.specs, func(n string) []string { return []string{momentPrefix + n} })
	if err != nil {
		return err
	}
	vel, err := decodeParams(path, ts, t.m.specs, func(n string) []string { return []string{velocityPrefix + n} })
	if err != nil {
		return err
	}
	t.mom, t.vel, t.step, t.acc, t.hostAcc = mom, vel, step, nil, nil
	return nil
}
