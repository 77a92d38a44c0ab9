package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/safetensors"
)

// PEFT's file names for a LoRA adapter.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// peftConfig is adapter_config.json as PEFT's LoraConfig writes it. The
// fields hacrl does not implement must keep their defaults (null, false,
// empty) for a file to load.
type peftConfig struct {
	PeftType           string          `json:"peft_type"`
	TaskType           string          `json:"task_type"`
	BaseModel          *string         `json:"base_model_name_or_path"`
	R                  int             `json:"r"`
	LoraAlpha          float64         `json:"lora_alpha"`
	LoraDropout        float64         `json:"lora_dropout"`
	TargetModules      json.RawMessage `json:"target_modules"` // a list of names, or one regular expression
	Bias               string          `json:"bias"`
	FanInFanOut        bool            `json:"fan_in_fan_out"`
	UseRSLoRA          bool            `json:"use_rslora"`
	UseDoRA            bool            `json:"use_dora"`
	InferenceMode      bool            `json:"inference_mode"`
	InitLoraWeights    json.RawMessage `json:"init_lora_weights"`
	ModulesToSave      json.RawMessage `json:"modules_to_save"`
	LayersToTransform  json.RawMessage `json:"layers_to_transform"`
	LayersPattern      json.RawMessage `json:"layers_pattern"`
	RankPattern        json.RawMessage `json:"rank_pattern"`
	AlphaPattern       json.RawMessage `json:"alpha_pattern"`
	Revision           *string         `json:"revision"`
	ExcludeModules     json.RawMessage `json:"exclude_modules,omitempty"`
	TrainableTokenIdxs json.RawMessage `json:"trainable_token_indices,omitempty"`
}

// SaveAdapters writes m's adapters into dir as PEFT does, creating dir if
// needed: adapter_config.json (base names the base model, as
// base_model_name_or_path) and adapter_model.safetensors, float32, with
// PEFT's tensor names (base_model.model.<module>.lora_A.weight [r,in],
// lora_B.weight [out,r]). PEFT's PeftModel.from_pretrained loads the
// directory onto the same base. Each file is replaced atomically.
func (m *Model) SaveAdapters(dir, base string) error {
	if m.lora == nil {
		return fmt.Errorf("model: save adapters: the model has no LoRA adapters")
	}
	ad := m.lora
	targets, err := json.Marshal(ad.cfg.Pattern)
	if ad.cfg.Pattern == "" {
		names := ad.cfg.Targets
		if slices.Contains(names, AllLinear) { // as PEFT saves it: the modules it found
			names = moduleNames(m.cfg.Family)
		}
		targets, err = json.Marshal(names)
	}
	if err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	null := json.RawMessage("null")
	cfg := peftConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", R: ad.cfg.Rank, LoraAlpha: ad.cfg.Alpha,
		TargetModules: targets, Bias: "none", FanInFanOut: m.cfg.Family == "gpt", UseRSLoRA: ad.cfg.RSLoRA,
		InferenceMode: true, InitLoraWeights: json.RawMessage("true"), ModulesToSave: null, LayersToTransform: null, LayersPattern: null,
		RankPattern: json.RawMessage("{}"), AlphaPattern: json.RawMessage("{}")}
	if base != "" {
		cfg.BaseModel = &base
	}
	switch {
	case ad.cfg.ExcludePattern != "":
		cfg.ExcludeModules, err = json.Marshal(ad.cfg.ExcludePattern)
	case len(ad.cfg.Exclude) > 0:
		cfg.ExcludeModules, err = json.Marshal(ad.cfg.Exclude)
	}
	if err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	if len(ad.cfg.Layers) > 0 {
		cfg.LayersToTransform, _ = json.Marshal(ad.cfg.Layers)
	}
	if len(ad.cfg.LayersPattern) > 0 {
		cfg.LayersPattern, _ = json.Marshal(ad.cfg.LayersPattern)
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, AdapterConfigFile), append(data, '\n')); err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	m.mu.RLock() // Apply waits until the adapters are written
	defer m.mu.RUnlock()
	if err := safetensors.WriteEntries(filepath.Join(dir, AdapterWeightsFile), entries(ad.specs, ad.host, ad.params, "", "F32"),
		map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("model: save adapters: %w", err)
	}
	return nil
}

// IsAdapterDir reports whether dir holds a PEFT adapter (its
// adapter_config.json).
func IsAdapterDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, AdapterConfigFile))
	return err == nil
}

// ReadAdapterConfig reads dir/adapter_config.json: the adapters'
// configuration and the base model it names ("" if none): r, lora_alpha,
// use_rslora, target_modules and exclude_modules (each a list of names or
// one regular expression), layers_to_transform and layers_pattern, matched
// as PEFT does. A field that
// would make PEFT compute something plain LoRA on the blocks' linear layers
// does not is refused, naming the file and the field: DoRA, bias training
// (bias, lora_bias), modules_to_save, trainable tokens, per-module ranks
// or alphas, layer replication, parameter targets, a task
// other than CAUSAL_LM, the variants of PEFT that change
// the forward pass (aLoRA, QALoRA, BD-LoRA, Arrow, KaSA, VeLoRA,
// MonteCLoRA, MiCA) and initializations that rewrite the base weights
// (PiSSA, OLoRA, CorDA, LoftQ, LoRA-GA: such an adapter is relative to a
// changed base). lora_dropout is accepted whatever it is: it acts in
// training only. Fields this version does not know are accepted only with
// an empty value (null, false, "", [] or {}).
func ReadAdapterConfig(dir string) (LoRA, string, error) {
	path := filepath.Join(dir, AdapterConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return LoRA{}, "", fmt.Errorf("model: read adapter config: %w", err)
	}
	var c peftConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return LoRA{}, "", fmt.Errorf("model: read adapter config %s: %w", path, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return LoRA{}, "", fmt.Errorf("model: read adapter config %s: %w", path, err)
	}
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("model: adapter config %s: %s is %v, want %s (hacrl implements plain LoRA on the blocks' linear layers)", path, field, v, want)
	}
	switch {
	case c.PeftType != "LORA":
		return LoRA{}, "", bad("peft_type", fmt.Sprintf("%q", c.PeftType), `"LORA"`)
	case c.TaskType != "" && c.TaskType != "CAUSAL_LM":
		return LoRA{}, "", bad("task_type", fmt.Sprintf("%q", c.TaskType), `"CAUSAL_LM" or null`)
	case c.Bias != "" && c.Bias != "none":
		return LoRA{}, "", bad("bias", fmt.Sprintf("%q", c.Bias), `"none"`)
	}
	for _, f := range peftUnsupported {
		if raw, ok := fields[f]; ok && !emptyJSON(raw) {
			return LoRA{}, "", bad(f, compactJSON(raw), "null, false or empty")
		}
	}
	if raw, ok := fields["init_lora_weights"]; ok {
		var init any
		if err := json.Unmarshal(raw, &init); err != nil {
			return LoRA{}, "", fmt.Errorf("model: read adapter config %s: init_lora_weights: %w", path, err)
		}
		switch v := init.(type) {
		case nil, bool:
		case string:
			if !slices.Contains(peftPlainInits, v) {
				return LoRA{}, "", bad("init_lora_weights", compactJSON(raw),
					`true, false, "gaussian", "eva" or "orthogonal" (PiSSA, OLoRA, CorDA, LoftQ and LoRA-GA adapters are relative to a rewritten base: convert them to plain LoRA with PEFT's path_initial_model_for_weight_conversion)`)
			}
		default:
			return LoRA{}, "", bad("init_lora_weights", compactJSON(raw), "a boolean or the name of an initialization")
		}
	}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if raw := fields[f]; !slices.Contains(peftKnown, f) && !emptyJSON(raw) {
			return LoRA{}, "", fmt.Errorf("model: adapter config %s: field %s is %s: not a PEFT option hacrl knows, so it may change what the adapter computes (want null, false or empty)", path, f, compactJSON(raw))
		}
	}
	l := LoRA{Rank: c.R, Alpha: c.LoraAlpha, RSLoRA: c.UseRSLoRA}
	if err := json.Unmarshal(c.TargetModules, &l.Pattern); err != nil {
		l.Pattern = ""
		if err := json.Unmarshal(c.TargetModules, &l.Targets); err != nil {
			return LoRA{}, "", fmt.Errorf("model: adapter config %s: target_modules is %s, want a list of module names or one regular expression", path, c.TargetModules)
		}
	}
	if l.Pattern == AllLinear { // PEFT's one string that is not a pattern
		l.Pattern, l.Targets = "", []string{AllLinear}
	}
	if l.Layers, err = oneOrList[int](c.LayersToTransform); err != nil {
		return LoRA{}, "", fmt.Errorf("model: adapter config %s: layers_to_transform is %s, want a block index or a list of them", path, compactJSON(c.LayersToTransform))
	}
	if l.LayersPattern, err = oneOrList[string](c.LayersPattern); err != nil {
		return LoRA{}, "", fmt.Errorf("model: adapter config %s: layers_pattern is %s, want a name or a list of names", path, compactJSON(c.LayersPattern))
	}
	if !emptyJSON(c.ExcludeModules) {
		if err := json.Unmarshal(c.ExcludeModules, &l.ExcludePattern); err != nil {
			l.ExcludePattern = ""
			if err := json.Unmarshal(c.ExcludeModules, &l.Exclude); err != nil {
				return LoRA{}, "", fmt.Errorf("model: adapter config %s: exclude_modules is %s, want a list of module names or one regular expression", path, c.ExcludeModules)
			}
		}
	}
	if err := l.Validate(); err != nil {
		return LoRA{}, "", fmt.Errorf("adapter config %s: %w", path, err)
	}
	base := ""
	if c.BaseModel != nil {
		base = *c.BaseModel
	}
	return l, base, nil
}

// oneOrList decodes a PEFT option written as one value or as a list of
// them; an empty option (see emptyJSON) is nil.
func oneOrList[T any](raw json.RawMessage) ([]T, error) {
	if emptyJSON(raw) {
		return nil, nil
	}
	var one T
	if json.Unmarshal(raw, &one) == nil {
		return []T{one}, nil
	}
	var list []T
	err := json.Unmarshal(raw, &list)
	return list, err
}

// compactJSON is raw without its insignificant spaces, for messages.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// emptyJSON reports whether raw is a JSON value that leaves a PEFT option
// off: null, false, "", [] or {}.
func emptyJSON(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "false", `""`, "[]", "{}":
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// The fields of PEFT's LoraConfig (PEFT 0.21) that change what an adapter
// computes unless they are empty or false.
var peftUnsupported = []string{
	"use_dora", "lora_bias", "modules_to_save", "rank_pattern", "alpha_pattern",
	"trainable_token_indices", "layer_replication", "target_parameters",
	"alora_invocation_tokens", "use_qalora", "use_bdlora", "arrow_config", "kasa_config", "velora_config",
	"monteclora_config",
}

// peftPlainInits are the values of init_lora_weights that only draw A and
// B, leaving the base as it is.
var peftPlainInits = []string{"gaussian", "eva", "orthogonal"}

// peftKnown are the fields of PEFT's LoraConfig (and of PEFT's saving)
// whose values hacrl reads or that do not change what a saved adapter
// computes: an initialization's own settings, options of model kinds
// hacrl does not load (Megatron, GPTQ), and bookkeeping.
var peftKnown = append([]string{
	"peft_type", "task_type", "base_model_name_or_path", "revision", "r", "lora_alpha", "lora_dropout",
	"target_modules", "bias", "fan_in_fan_out", "use_rslora", "inference_mode", "init_lora_weights",
	"exclude_modules", "layers_to_transform", "layers_pattern", "loftq_config", "eva_config", "corda_config", "lora_ga_config", "megatron_config",
	"megatron_core", "qalora_group_size", "ensure_weight_tying", "auto_mapping", "peft_version",
}, peftUnsupported...)

// LoadAdapters reads a PEFT LoRA adapter from dir (adapter_config.json and
// adapter_model.safetensors, as SaveAdapters or PEFT writes them, tensors
// in F32, BF16, F16 or F64) onto m, the base the adapter was trained on,
// replacing the adapters m had (a resumed run restores its agents'
// adapters so, on the base it holds already). Every tensor of the file must
// be one of the adapter's, and every adapted module must have its A and B;
// errors name the file and the tensor, and leave m as it was. Make a
// Trainer after loading.
func (m *Model) LoadAdapters(dir string) error {
	if err := m.canAdapt(true); err != nil {
		return err
	}
	l, _, err := ReadAdapterConfig(dir)
	if err != nil {
		return err
	}
	mods, err := m.cfg.loraModules(l)
	if err != nil {
		return fmt.Errorf("adapter %s: %w", dir, err)
	}
	ad := &adapters{cfg: l, mods: mods, specs: adapterSpecs(mods, l.Rank)}
	path := filepath.Join(dir, AdapterWeightsFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("model: load adapter %s: no %s", dir, AdapterWeightsFile)
	}
	w, err := safetensors.OpenSingle(path)
	if err != nil {
		return fmt.Errorf("model: load adapter: %w", err)
	}
	defer w.Close()
	known := map[string]bool{}
	for _, s := range ad.specs {
		known[s.name] = true
	}
	for _, name := range w.Names() {
		if mod, ok := outsideBlocks(name); ok {
			return fmt.Errorf("model: load adapter %s: tensor %q is of %s, outside the blocks: hacrl adapts their linear layers only (PEFT's all-linear), not the embeddings or the LM head, and does not replace them",
				path, name, mod)
		}
		if !known[name] {
			return fmt.Errorf("model: load adapter %s: tensor %q is not one of this adapter's (%d lora_A/lora_B tensors of the modules target_modules selects on this %s model)",
				path, name, len(ad.specs), m.cfg.Family)
		}
	}
	ad.host, err = decodeParams(w, ad.specs, func(n string) []string { return []string{n} })
	if err != nil {
		return err
	}
	m.setAdapters(ad)
	return nil
}

// outsideBlocks reports the module a tensor of a PEFT adapter file belongs
// to when that module is not in a transformer block: an LM head or an
// embedding PEFT adapted (base_model.model.lm_head.lora_A.weight,
// ….embed_tokens.lora_embedding_A) or saved whole (….base_layer.weight).
func outsideBlocks(name string) (string, bool) {
	mod, ok := strings.CutPrefix(name, peftPrefix)
	if !ok || strings.HasPrefix(mod, "model.layers.") || strings.HasPrefix(mod, "transformer.h.") {
		return "", false
	}
	for _, cut := range []string{".lora_", ".base_layer.", ".modules_to_save.", ".weight", ".bias"} {
		if i := strings.Index(mod, cut); i >= 0 {
			mod = mod[:i]
		}
	}
	return mod, true
}
