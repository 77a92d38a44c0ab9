package model

import (
	"errors"
	"fmt"
	"io/fs"
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
	// WeightsIndexFile is the index of a sharded checkpoint, whose shards
	// are model-00001-of-0000K.safetensors, ….
	WeightsIndexFile = WeightsFile + safetensors.IndexSuffix
)

// SaveOptions are Model.SaveWith's choices; the zero value is Save's.
type SaveOptions struct {
	// DType of the saved weights: "float32", "bfloat16" or "float16"; ""
	// means the model's Config.DType (the dtype it was loaded from). The
	// config.json written records it as torch_dtype.
	DType string
	// MaxShardSize is the largest shard in bytes before the weights are
	// split into model-0000i-of-0000K.safetensors shards with an index; 0
	// means safetensors.DefaultMaxShardSize (5 GB, transformers' default).
	MaxShardSize int64
	// Exact stores the weights as float32 whatever DType is, while
	// config.json still records DType: a training checkpoint, from which a
	// resumed run continues with exactly the weights it had (rounding a
	// bfloat16 model's weights at every checkpoint would lose the small
	// updates of a low learning rate), and whose final export is still
	// written in DType.
	Exact bool
}

// Save writes the model as a Hugging Face checkpoint into dir, creating it
// if needed: config.json, the weights in the model's Config.DType (so a
// bfloat16 checkpoint is saved as bfloat16) as model.safetensors or, above 5
// GB, as shards, with model.safetensors.index.json in both cases, and
// generation_config.json when the model was loaded with one (an earlier
// one in dir is removed otherwise). (The index of
// a single file is there for vLLM, which would otherwise load every
// *.safetensors file of the directory, optimizer.safetensors included;
// transformers takes model.safetensors when it exists.) See SaveWith.
func (m *Model) Save(dir string) error { return m.SaveWith(dir, SaveOptions{}) }

// SaveWith is Save with a choice of dtype and shard size. Narrowing to
// bfloat16 or float16 rounds to nearest, ties to even, as PyTorch's .to()
// does. Each file is replaced atomically and files of an earlier layout
// (an index or shards the new one does not use) are removed after the new
// ones are written; to replace a whole checkpoint at once, save into a
// temporary directory and rename it.
func (m *Model) SaveWith(dir string, opts SaveOptions) error {
	cfg := m.cfg
	if opts.DType != "" {
		cfg.DType = opts.DType
	}
	stDType, ok := weightDTypes[cfg.DType]
	if !ok {
		return fmt.Errorf("model: save %s: dtype %q, want \"float32\", \"bfloat16\" or \"float16\"", dir, cfg.DType)
	}
	if opts.Exact {
		stDType = weightDTypes["float32"]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	if err := cfg.WriteJSON(filepath.Join(dir, ConfigFile)); err != nil {
		return err
	}
	genPath := filepath.Join(dir, GenerationConfigFile)
	if m.gen != nil {
		if err := m.gen.WriteJSON(genPath); err != nil {
			return err
		}
	} else if err := os.Remove(genPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("model: save: %w", err) // another model's end tokens must not stay
	}
	o := m.owner() // the adapted model, for Base's
	o.mu.RLock()   // Apply waits until the weights are written
	defer o.mu.RUnlock()
	var es []safetensors.Entry
	if o.frozen != nil {
		es = o.frozen.entries(m.specs, o.host, stDType)
	} else {
		es = entries(m.specs, o.host, o.params, "", stDType)
	}
	_, err := safetensors.WriteSharded(dir, "model", es, safetensors.ShardOptions{
		MaxShardSize: opts.MaxShardSize, Metadata: map[string]string{"format": "pt"},
		AlwaysIndex: true, // optimizer.safetensors may sit beside: vLLM would load it as weights without an index
	})
	if err != nil {
		return fmt.Errorf("model: save: %w", err)
	}
	return nil
}

// entries returns one safetensors entry per spec, in their order
// (layer by layer, as a PyTorch state dict), named prefix + its Hugging
// Face name and encoded as dtype only when the writer reaches it. The
// values come from flat (the host layout, which is the files') when it is
// not nil, else from the tensors.
func entries(specs []paramSpec, flat []float32, values []*tensors.Tensor, prefix, dtype string) []safetensors.Entry {
	out := make([]safetensors.Entry, len(specs))
	var views [][]float32
	if flat != nil {
		views = flatViews(specs, flat)
	}
	for i, s := range specs {
		out[i] = safetensors.Entry{Name: prefix + s.name, DType: dtype, Shape: s.fileShape(), Data: func() ([]byte, error) {
			var v []float32
			if views != nil {
				v = views[i]
			} else {
				v = float32s(values[i])
				if s.transposed {
					v = transpose(v, s.shape[0], s.shape[1])
				}
			}
			t, err := safetensors.FromFloat32As(dtype, s.fileShape(), v)
			return t.Data, err
		}}
	}
	return out
}

// Load reads a model saved by Save, or a Hugging Face GPT-2, Llama or Qwen2
// checkpoint with the same layout: dir/config.json, the weights in
// dir/model.safetensors or, when that file is absent, in the shards that
// dir/model.safetensors.index.json names (the order transformers tries
// them in), and dir/generation_config.json when present. Tensors may be
// F32, BF16, F16 or F64; GPT-2's "transformer." prefix is accepted, and
// tensors the model does not use are ignored. The weights are read tensor
// by tensor straight into the model's float32 parameters, so the load needs
// little memory beyond the loaded model's. Errors name the file and the
// tensor or field at fault; a NaN or infinite weight is refused.
func Load(b compute.Backend, dir string) (*Model, error) {
	cfg, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	gen, err := readGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	m := blankModel(b, cfg, dtypes.Float32)
	m.gen = gen
	w, err := openWeights(dir)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	m.host, err = decodeParams(w, m.specs, func(name string) []string {
		if cfg.Family == "gpt" {
			return []string{name, "transformer." + name}
		}
		return []string{name}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// openWeights opens dir's model.safetensors, or else the shards of its
// model.safetensors.index.json.
func openWeights(dir string) (*safetensors.Files, error) {
	single := filepath.Join(dir, WeightsFile)
	_, err := os.Stat(single)
	switch {
	case err == nil:
		w, err := safetensors.OpenSingle(single)
		if err != nil {
			return nil, fmt.Errorf("model: load: %w", err)
		}
		return w, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("model: load: %w", err)
	}
	index := filepath.Join(dir, WeightsIndexFile)
	if _, err := os.Stat(index); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model: load %s: no weights: neither %s nor %s is there", dir, WeightsFile, WeightsIndexFile)
	}
	w, err := safetensors.OpenIndex(index)
	if err != nil {
		return nil, fmt.Errorf("model: load: %w", err)
	}
	return w, nil
}

// decodeParams reads one tensor per spec from w into a new flat float32
// buffer in the host layout (host.go, the files' own), looking each up
// under the names aliases returns for the spec's name. It streams each
// tensor's values from its file in chunks, converting them on the way, so
// no tensor is held twice.
func decodeParams(w *safetensors.Files, specs []paramSpec, aliases func(string) []string) ([]float32, error) {
	_, total := flatLayout(specs)
	flat := make([]float32, total)
	for i, dst := range flatViews(specs, flat) {
		s := specs[i]
		var f *safetensors.File
		name := aliases(s.name)[0]
		for _, alias := range aliases(s.name) {
			var ok bool
			if f, ok = w.Lookup(alias); ok {
				name = alias
				break
			}
		}
		if f == nil {
			where := w.Files()[0].Path()
			if len(w.Files()) > 1 {
				where = "the shards of " + filepath.Join(filepath.Dir(where), WeightsIndexFile)
			}
			return nil, fmt.Errorf("model: load %s: tensor %q is missing", where, name)
		}
		dtype, shape, _ := f.Info(name)
		if !slices.Equal(shape, s.fileShape()) {
			return nil, fmt.Errorf("model: load %s: tensor %q has shape %v, want %v%s", f.Path(), name, shape, s.fileShape(), s.originNote())
		}
		switch dtype {
		case "F32", "F16", "BF16", "F64":
		default:
			return nil, fmt.Errorf("model: load %s: tensor %q: dtype %s, want F32, BF16, F16 or F64", f.Path(), name, dtype)
		}
		err := f.Float32Chunks(name, func(first int, chunk []float32) error {
			if err := checkFinite(chunk, first); err != nil {
				return err
			}
			copy(dst[first:], chunk)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("model: load %s: tensor %q: %w", f.Path(), name, err)
		}
	}
	return flat, nil
}

// checkFinite reports the first NaN or infinite value of v, whose first
// element is element first of its tensor (a float64 value too large for
// float32 arrives here as infinite): weights and optimizer moments must be
// finite, and one such value would make every forward pass through it
// non-finite.
func checkFinite(v []float32, first int) error {
	for i, x := range v {
		if x-x != 0 { // NaN and ±Inf, in one comparison
			return fmt.Errorf("element %d is %v; a checkpoint must hold finite values", first+i, x)
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
	var all []safetensors.Entry
	switch {
	case t.hostMom != nil:
		all = append(entries(t.specs(), t.hostMom, nil, momentPrefix, "F32"), entries(t.specs(), t.hostVel, nil, velocityPrefix, "F32")...)
	case t.mom != nil:
		all = append(entries(t.specs(), nil, t.mom, momentPrefix, "F32"), entries(t.specs(), nil, t.vel, velocityPrefix, "F32")...)
	default: // before the first step: zero moments
		_, total := flatLayout(t.specs())
		zeros := make([]float32, total)
		all = append(entries(t.specs(), zeros, nil, momentPrefix, "F32"), entries(t.specs(), zeros, nil, velocityPrefix, "F32")...)
	}
	meta := map[string]string{
		stepKey: strconv.FormatInt(t.step, 10),
		"beta1": fmt.Sprint(t.opt.Beta1), "beta2": fmt.Sprint(t.opt.Beta2), "epsilon": fmt.Sprint(t.opt.Epsilon),
		"weight_decay": fmt.Sprint(t.opt.WeightDecay), "max_grad_norm": fmt.Sprint(t.opt.MaxGradNorm),
	}
	if err := safetensors.WriteEntries(filepath.Join(dir, OptimizerFile), all, meta); err != nil {
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
	w, err := safetensors.OpenSingle(path)
	if err != nil {
		return fmt.Errorf("model: load optimizer state: %w", err)
	}
	defer w.Close()
	meta := w.Files()[0].Metadata()
	step, err := strconv.ParseInt(meta[stepKey], 10, 64)
	if err != nil || step < 0 {
		return fmt.Errorf("model: load optimizer state %s: metadata %q is %q, want a step count", path, stepKey, meta[stepKey])
	}
	mom, err := decodeParams(w, t.specs(), func(n string) []string { return []string{momentPrefix + n} })
	if err != nil {
		return err
	}
	vel, err := decodeParams(w, t.specs(), func(n string) []string { return []string{velocityPrefix + n} })
	if err != nil {
		return err
	}
	t.hostMom, t.hostVel, t.mom, t.vel, t.step = mom, vel, nil, nil, step
	t.acc, t.hostAcc, t.pending = nil, nil, false
	return nil
}
