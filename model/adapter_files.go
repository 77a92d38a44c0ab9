package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	InitLoraWeights    bool            `json:"init_lora_weights"`
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
		InferenceMode: true, InitLoraWeights: true, ModulesToSave: null, LayersToTransform: null, LayersPattern: null,
		RankPattern: json.RawMessage("{}"), AlphaPattern: json.RawMessage("{}")}
	if base != "" {
		cfg.BaseModel = &base
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
// configuration and the base model it names ("" if none). PEFT options
// hacrl does not implement (DoRA, bias training, modules_to_save, per-layer
// ranks or layer subsets) are refused, naming the field. lora_dropout is
// accepted whatever it is: it acts in training only.
func ReadAdapterConfig(dir string) (LoRA, string, error) {
	path := filepath.Join(dir, AdapterConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return LoRA{}, "", fmt.Errorf("model: read adapter config: %w", err)
	}
	var c peftConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return LoRA{}, "", fmt.Errorf("model: read adapter config %s: %w", path, err)
	}
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("model: adapter config %s: %s is %v, want %s (hacrl implements plain LoRA)", path, field, v, want)
	}
	empty := func(raw json.RawMessage) bool {
		s := strings.TrimSpace(string(raw))
		return s == "" || s == "null" || s == "{}" || s == "[]"
	}
	switch {
	case c.PeftType != "LORA":
		return LoRA{}, "", bad("peft_type", fmt.Sprintf("%q", c.PeftType), `"LORA"`)
	case c.UseDoRA:
		return LoRA{}, "", bad("use_dora", true, "false")
	case c.Bias != "" && c.Bias != "none":
		return LoRA{}, "", bad("bias", fmt.Sprintf("%q", c.Bias), `"none"`)
	case !empty(c.ModulesToSave):
		return LoRA{}, "", bad("modules_to_save", string(c.ModulesToSave), "null")
	case !empty(c.LayersToTransform):
		return LoRA{}, "", bad("layers_to_transform", string(c.LayersToTransform), "null")
	case !empty(c.RankPattern):
		return LoRA{}, "", bad("rank_pattern", string(c.RankPattern), "{}")
	case !empty(c.AlphaPattern):
		return LoRA{}, "", bad("alpha_pattern", string(c.AlphaPattern), "{}")
	case !empty(c.ExcludeModules):
		return LoRA{}, "", bad("exclude_modules", string(c.ExcludeModules), "null")
	case !empty(c.TrainableTokenIdxs):
		return LoRA{}, "", bad("trainable_token_indices", string(c.TrainableTokenIdxs), "null")
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
	if err := l.Validate(); err != nil {
		return LoRA{}, "", fmt.Errorf("adapter config %s: %w", path, err)
	}
	base := ""
	if c.BaseModel != nil {
		base = *c.BaseModel
	}
	return l, base, nil
}

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
