package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// Config describes one transformer. The zero value of KVHeads, Hidden,
// Activation, NormEps, RopeTheta, HeadSize and ModelType means "the family's
// default" (see Normalized); every other field must be set.
type Config struct {
	Family        string  // "gpt" or "llama"
	ModelType     string  // HF model_type written to config.json: "gpt2" (gpt); "llama", "qwen2" or "qwen3" (llama)
	Vocab         int     // vocabulary size
	Dim           int     // residual width d
	Layers        int     // number of blocks
	Heads         int     // query heads; Dim must be a multiple unless HeadSize is set
	KVHeads       int     // key/value heads (llama, grouped-query attention); gpt: equal to Heads
	Hidden        int     // MLP inner width; default 4·Dim for gpt
	MaxSeq        int     // longest sequence (positions 0..MaxSeq-1)
	Activation    string  // gpt: "gelu" (exact), "gelu_new" (tanh), "relu"; llama: "silu"
	NormEps       float64 // LayerNorm/RMSNorm epsilon; default 1e-5 (gpt), 1e-6 (llama)
	RopeTheta     float64 // rotary base (llama); default 10000
	TieEmbeddings bool    // the LM head reuses the token embedding matrix
	AttentionBias bool    // llama: biases on q/k/v (and on o_proj unless ModelType is "qwen2")
	BOS, EOS      int     // special token ids, −1 if none

	// HeadSize is the width of one attention head (llama: HF head_dim); 0
	// means Dim/Heads. With it q_proj is [Heads·HeadSize, Dim] and o_proj
	// [Dim, Heads·HeadSize].
	HeadSize int
	// QKNorm applies an RMSNorm over each query and key head after the
	// projections and before the rotary embedding (Qwen3's
	// self_attn.q_norm and self_attn.k_norm, gains [HeadDim]); it is set
	// exactly when ModelType is "qwen3".
	QKNorm bool
	// RopeScaling rescales the rotary frequencies (llama: HF rope_scaling);
	// nil means none.
	RopeScaling *RopeScaling

	// DType is the dtype of the checkpoint's weights (config.json's
	// torch_dtype, or dtype in newer transformers): "float32" (the default),
	// "bfloat16" or "float16". The model computes in float32 whatever it is;
	// Save writes the weights in it.
	DType string
}

// RopeScaling is a rotary frequency scaling, Hugging Face's rope_scaling.
// Only Type "llama3" (Llama 3.1 and 3.2) is supported: with wavelength
// λ_i = 2π/inv_freq_i, L = OriginalMaxPos, frequencies of λ > L/LowFreqFactor
// are divided by Factor, those of λ < L/HighFreqFactor are kept, and those
// between are interpolated with s = (L/λ − LowFreqFactor)/(HighFreqFactor −
// LowFreqFactor): inv_freq·((1−s)/Factor + s).
type RopeScaling struct {
	Type           string  // rope_type: "llama3"
	Factor         float64 // factor, > 0
	LowFreqFactor  float64 // low_freq_factor, > 0
	HighFreqFactor float64 // high_freq_factor, > LowFreqFactor
	OriginalMaxPos int     // original_max_position_embeddings, > 0
}

// Normalized returns c with the family defaults filled in, QKNorm set for
// ModelType "qwen3", a HeadSize equal to Dim/Heads spelled 0, and its own
// copy of RopeScaling: equal models have deeply equal normalized configs.
func (c Config) Normalized() Config {
	if c.DType == "" {
		c.DType = "float32"
	}
	switch c.Family {
	case "gpt":
		if c.ModelType == "" {
			c.ModelType = "gpt2"
		}
		if c.KVHeads == 0 {
			c.KVHeads = c.Heads
		}
		if c.Hidden == 0 {
			c.Hidden = 4 * c.Dim
		}
		if c.Activation == "" {
			c.Activation = "gelu"
		}
		if c.NormEps == 0 {
			c.NormEps = 1e-5
		}
	case "llama":
		if c.ModelType == "" {
			c.ModelType = "llama"
		}
		if c.KVHeads == 0 {
			c.KVHeads = c.Heads
		}
		if c.Activation == "" {
			c.Activation = "silu"
		}
		if c.NormEps == 0 {
			c.NormEps = 1e-6
		}
		if c.RopeTheta == 0 {
			c.RopeTheta = 10000
		}
		switch c.ModelType {
		case "qwen3":
			c.QKNorm = true
		case "qwen2": // Qwen2's q, k and v projections always have biases (config.json has no field for it)
			c.AttentionBias = true
		}
	}
	if c.Heads > 0 && c.HeadSize*c.Heads == c.Dim {
		c.HeadSize = 0 // the default, in one spelling
	}
	if c.RopeScaling != nil {
		s := *c.RopeScaling // a copy: the normalized config shares nothing with c
		c.RopeScaling = &s
	}
	return c
}

// HeadDim is the width of one attention head: HeadSize, or Dim/Heads.
func (c Config) HeadDim() int {
	if c.HeadSize > 0 {
		return c.HeadSize
	}
	return c.Dim / c.Heads
}

// Validate reports the first field of the normalized config that is out of
// range, naming it.
func (c Config) Validate() error {
	c = c.Normalized()
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("model config: field %s: %s", field, fmt.Sprintf(format, args...))
	}
	switch c.Family {
	case "gpt":
		if c.ModelType != "gpt2" {
			return bad("ModelType", "%q is not a gpt model type, want \"gpt2\"", c.ModelType)
		}
		if c.KVHeads != c.Heads {
			return bad("KVHeads", "gpt has no grouped-query attention: %d, want Heads (%d)", c.KVHeads, c.Heads)
		}
		switch c.Activation {
		case "gelu", "gelu_new", "relu":
		default:
			return bad("Activation", "%q, want \"gelu\", \"gelu_new\" or \"relu\" for gpt", c.Activation)
		}
		if c.AttentionBias {
			return bad("AttentionBias", "gpt always has biases; leave it false")
		}
		if c.HeadSize != 0 {
			return bad("HeadSize", "%d: gpt heads are Dim/Heads wide; leave it 0", c.HeadSize)
		}
		if c.QKNorm {
			return bad("QKNorm", "gpt has no query/key norms; leave it false")
		}
		if c.RopeScaling != nil {
			return bad("RopeScaling", "gpt has no rotary embedding; leave it nil")
		}
	case "llama":
		if c.ModelType != "llama" && c.ModelType != "qwen2" && c.ModelType != "qwen3" {
			return bad("ModelType", "%q, want \"llama\", \"qwen2\" or \"qwen3\"", c.ModelType)
		}
		if c.Activation != "silu" {
			return bad("Activation", "%q, want \"silu\" for llama", c.Activation)
		}
		if !(c.RopeTheta > 0) {
			return bad("RopeTheta", "%v, want > 0", c.RopeTheta)
		}
		if c.QKNorm != (c.ModelType == "qwen3") {
			return bad("QKNorm", "%v: query/key norms come with ModelType \"qwen3\" and only with it (ModelType is %q)", c.QKNorm, c.ModelType)
		}
		if c.HeadSize < 0 {
			return bad("HeadSize", "%d, want ≥ 0 (0: Dim/Heads)", c.HeadSize)
		}
		if err := c.RopeScaling.validate(); err != nil {
			return err
		}
	default:
		return bad("Family", "%q, want \"gpt\" or \"llama\"", c.Family)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Vocab", c.Vocab}, {"Dim", c.Dim}, {"Layers", c.Layers}, {"Heads", c.Heads},
		{"KVHeads", c.KVHeads}, {"Hidden", c.Hidden}, {"MaxSeq", c.MaxSeq}} {
		if f.v <= 0 {
			return bad(f.name, "%d, want > 0", f.v)
		}
	}
	if c.HeadSize == 0 && c.Dim%c.Heads != 0 {
		return bad("Heads", "%d does not divide Dim (%d); set HeadSize for heads of another width", c.Heads, c.Dim)
	}
	if c.Heads%c.KVHeads != 0 {
		return bad("KVHeads", "%d does not divide Heads (%d)", c.KVHeads, c.Heads)
	}
	if c.Family == "llama" && c.HeadDim()%2 != 0 {
		return bad("HeadSize", "head width %d must be even for rotary positions", c.HeadDim())
	}
	if !(c.NormEps > 0) {
		return bad("NormEps", "%v, want > 0", c.NormEps)
	}
	if c.BOS < -1 || c.BOS >= c.Vocab {
		return bad("BOS", "%d, want −1 or a token id below Vocab (%d)", c.BOS, c.Vocab)
	}
	if c.EOS < -1 || c.EOS >= c.Vocab {
		return bad("EOS", "%d, want −1 or a token id below Vocab (%d)", c.EOS, c.Vocab)
	}
	if _, ok := weightDTypes[c.DType]; !ok {
		return bad("DType", "%q, want \"float32\", \"bfloat16\" or \"float16\"", c.DType)
	}
	return nil
}

// validate reports the first field of s out of range; nil is valid.
func (s *RopeScaling) validate() error {
	if s == nil {
		return nil
	}
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("model config: field RopeScaling.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Type != "llama3":
		return bad("Type", "%q, want \"llama3\"", s.Type)
	case !(s.Factor > 0):
		return bad("Factor", "%v, want > 0", s.Factor)
	case !(s.LowFreqFactor > 0):
		return bad("LowFreqFactor", "%v, want > 0", s.LowFreqFactor)
	case !(s.HighFreqFactor > s.LowFreqFactor):
		return bad("HighFreqFactor", "%v, want > LowFreqFactor (%v)", s.HighFreqFactor, s.LowFreqFactor)
	case s.OriginalMaxPos <= 0:
		return bad("OriginalMaxPos", "%d, want > 0", s.OriginalMaxPos)
	}
	return nil
}

// hfConfig is the union of the Hugging Face config.json fields of GPT-2 and
// Llama/Qwen2/Qwen3 that hacrl reads and writes. Pointers tell absent from
// zero. Fields it does not know (architectures, torch_dtype,
// transformers_version, use_cache, initializer_range, …) do not change the
// computation and are ignored.
type hfConfig struct {
	ModelType     string   `json:"model_type"`
	Architectures []string `json:"architectures,omitempty"`
	VocabSize     *int     `json:"vocab_size,omitempty"`

	// GPT-2.
	NEmbd       *int     `json:"n_embd,omitempty"`
	NLayer      *int     `json:"n_layer,omitempty"`
	NHead       *int     `json:"n_head,omitempty"`
	NPositions  *int     `json:"n_positions,omitempty"`
	NInner      *int     `json:"n_inner,omitempty"`
	ActFunction string   `json:"activation_function,omitempty"`
	LayerNormEp *float64 `json:"layer_norm_epsilon,omitempty"`

	// Llama / Qwen2 / Qwen3.
	HiddenSize       *int             `json:"hidden_size,omitempty"`
	NumLayers        *int             `json:"num_hidden_layers,omitempty"`
	NumHeads         *int             `json:"num_attention_heads,omitempty"`
	NumKVHeads       *int             `json:"num_key_value_heads,omitempty"`
	Intermediate     *int             `json:"intermediate_size,omitempty"`
	HiddenAct        string           `json:"hidden_act,omitempty"`
	MaxPositions     *int             `json:"max_position_embeddings,omitempty"`
	RopeTheta        *float64         `json:"rope_theta,omitempty"`
	RMSNormEps       *float64         `json:"rms_norm_eps,omitempty"`
	AttentionBias    *bool            `json:"attention_bias,omitempty"`
	MLPBias          *bool            `json:"mlp_bias,omitempty"`
	HeadDim          *int             `json:"head_dim,omitempty"`
	RopeScaling      *json.RawMessage `json:"rope_scaling,omitempty"`
	TieWordEmbedding *bool            `json:"tie_word_embeddings,omitempty"`
	// Read only: transformers 5 keeps rope_theta and the scaling in one
	// rope_parameters object; the others change the computation when set.
	RopeParameters      json.RawMessage `json:"rope_parameters,omitempty"`
	PartialRotaryFactor *float64        `json:"partial_rotary_factor,omitempty"`
	UseSlidingWindow    *bool           `json:"use_sliding_window,omitempty"`
	SlidingWindow       *int            `json:"sliding_window,omitempty"`
	MaxWindowLayers     *int            `json:"max_window_layers,omitempty"`
	LayerTypes          []string        `json:"layer_types,omitempty"`
	AttentionDropout    *float64        `json:"attention_dropout,omitempty"`

	BOS *int `json:"bos_token_id,omitempty"`
	EOS any  `json:"eos_token_id,omitempty"` // an int, or a list of ints in some HF configs

	TorchDType string `json:"torch_dtype,omitempty"`
	DType      string `json:"dtype,omitempty"` // transformers ≥ 4.56 writes this instead of torch_dtype
}

// weightDTypes maps Config.DType values to safetensors dtypes.
var weightDTypes = map[string]string{"float32": "F32", "bfloat16": "BF16", "float16": "F16"}

// parseDType returns Config.DType for config.json's dtype and torch_dtype
// fields ("" when both are absent); dtype wins when both are given.
func parseDType(dtype, torchDType string) (string, error) {
	field, v := "dtype", dtype
	if v == "" {
		field, v = "torch_dtype", torchDType
	}
	if _, ok := weightDTypes[v]; v != "" && !ok {
		return "", fmt.Errorf("field %q: %q, want \"float32\", \"bfloat16\" or \"float16\"", field, v)
	}
	return v, nil
}

// hfRope is a rope_scaling (or rope_parameters) object.
type hfRope struct {
	RopeType       *string  `json:"rope_type"`
	Type           *string  `json:"type"` // the older spelling of rope_type
	RopeTheta      *float64 `json:"rope_theta"`
	Factor         *float64 `json:"factor"`
	LowFreqFactor  *float64 `json:"low_freq_factor"`
	HighFreqFactor *float64 `json:"high_freq_factor"`
	OriginalMaxPos *int     `json:"original_max_position_embeddings"`
	// Read only to refuse it: a partial rotary embedding.
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// ReadConfig reads a Hugging Face config.json (model_type "gpt2", "llama",
// "qwen2" or "qwen3") and returns the validated config. Errors name the file
// and field; a field value hacrl does not implement (another rope_type,
// sliding-window attention, an MLP bias, …) is refused rather than ignored.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func parseConfig(data []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return Config{}, fmt.Errorf("config.json is not valid JSON: %w", err)
	}
	var errs []error
	need := func(field string, p *int) int {
		if p == nil {
			errs = append(errs, fmt.Errorf("field %q is missing", field))
			return 0
		}
		return *p
	}
	opt := func(p *int, def int) int {
		if p == nil {
			return def
		}
		return *p
	}
	optF := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	c := Config{ModelType: h.ModelType, BOS: opt(h.BOS, -1), EOS: -1, Vocab: need("vocab_size", h.VocabSize)}
	switch eos := h.EOS.(type) {
	case nil:
	case float64:
		c.EOS = int(eos)
	case []any:
		if len(eos) > 0 {
			if f, ok := eos[0].(float64); ok {
				c.EOS = int(f)
			}
		}
	default:
		errs = append(errs, fmt.Errorf("field \"eos_token_id\": %v is not a token id", h.EOS))
	}
	if dt, err := parseDType(h.DType, h.TorchDType); err != nil {
		errs = append(errs, err)
	} else {
		c.DType = dt
	}
	switch h.ModelType {
	case "gpt2":
		c.Family = "gpt"
		c.Dim = need("n_embd", h.NEmbd)
		c.Layers = need("n_layer", h.NLayer)
		c.Heads = need("n_head", h.NHead)
		c.KVHeads = c.Heads
		c.MaxSeq = need("n_positions", h.NPositions)
		c.Hidden = opt(h.NInner, 0)
		c.Activation = h.ActFunction
		if c.Activation == "gelu_pytorch_tanh" {
			c.Activation = "gelu_new"
		}
		c.NormEps = optF(h.LayerNormEp)
		c.TieEmbeddings = h.TieWordEmbedding == nil || *h.TieWordEmbedding // GPT-2's default is tied
	case "llama", "qwen2", "qwen3":
		c.Family = "llama"
		c.Dim = need("hidden_size", h.HiddenSize)
		c.Layers = need("num_hidden_layers", h.NumLayers)
		c.Heads = need("num_attention_heads", h.NumHeads)
		c.KVHeads = opt(h.NumKVHeads, c.Heads)
		c.Hidden = need("intermediate_size", h.Intermediate)
		c.MaxSeq = need("max_position_embeddings", h.MaxPositions)
		c.Activation = h.HiddenAct
		if c.Activation != "" && c.Activation != "silu" {
			errs = append(errs, fmt.Errorf("field \"hidden_act\": %q is not supported, want \"silu\"", c.Activation))
		}
		c.NormEps = optF(h.RMSNormEps)
		c.RopeTheta = optF(h.RopeTheta)
		c.TieEmbeddings = h.TieWordEmbedding != nil && *h.TieWordEmbedding
		// Qwen2 always has q/k/v biases; Llama and Qwen3 follow attention_bias.
		c.AttentionBias = h.ModelType == "qwen2" || (h.AttentionBias != nil && *h.AttentionBias)
		c.QKNorm = h.ModelType == "qwen3"
		if h.MLPBias != nil && *h.MLPBias {
			errs = append(errs, errors.New("field \"mlp_bias\": true is not supported"))
		}
		if h.AttentionDropout != nil && *h.AttentionDropout != 0 {
			errs = append(errs, fmt.Errorf("field \"attention_dropout\": %v is not supported, want 0", *h.AttentionDropout))
		}
		if h.PartialRotaryFactor != nil && *h.PartialRotaryFactor != 1 {
			errs = append(errs, fmt.Errorf("field \"partial_rotary_factor\": %v is not supported, want 1", *h.PartialRotaryFactor))
		}
		if h.HeadDim != nil {
			c.HeadSize = *h.HeadDim
			if c.HeadSize <= 0 || c.HeadSize%2 != 0 {
				errs = append(errs, fmt.Errorf("field \"head_dim\": %d, want a positive even width", c.HeadSize))
			}
		} else if h.ModelType == "qwen3" {
			c.HeadSize = 128 // Qwen3Config's default
		}
		if err := h.slidingWindow(c.Layers); err != nil {
			errs = append(errs, err)
		}
		var err error
		if c.RopeScaling, err = h.ropeScaling(&c.RopeTheta); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("field \"model_type\": %q, want \"gpt2\", \"llama\", \"qwen2\" or \"qwen3\"", h.ModelType))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c.Normalized(), nil
}

// slidingWindow refuses sliding-window attention, which Qwen2 and Qwen3
// use on layers max_window_layers and up (or on the layers layer_types
// names) when use_sliding_window is true and sliding_window is set.
func (h *hfConfig) slidingWindow(layers int) error {
	if h.UseSlidingWindow == nil || !*h.UseSlidingWindow || h.SlidingWindow == nil || h.ModelType == "llama" {
		return nil
	}
	sliding := h.MaxWindowLayers == nil || *h.MaxWindowLayers < layers
	if h.LayerTypes != nil {
		sliding = slices.Contains(h.LayerTypes, "sliding_attention")
	}
	if sliding {
		return fmt.Errorf("field \"use_sliding_window\": true (window %d) is not supported; only full attention is", *h.SlidingWindow)
	}
	return nil
}

// ropeScaling reads rope_scaling (or transformers 5's rope_parameters,
// which also carries rope_theta into *theta): nil for none, null or
// rope_type "default"; a RopeScaling for "llama3"; an error naming the
// field for anything else.
func (h *hfConfig) ropeScaling(theta *float64) (*RopeScaling, error) {
	field, raw := "rope_scaling", []byte(nil)
	if h.RopeScaling != nil {
		raw = *h.RopeScaling
	} else if len(h.RopeParameters) > 0 {
		field, raw = "rope_parameters", h.RopeParameters
	}
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var r hfRope
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("field %q: %w", field, err)
	}
	if field == "rope_parameters" && r.RopeTheta != nil {
		*theta = *r.RopeTheta
	}
	if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
		return nil, fmt.Errorf("field \"%s.partial_rotary_factor\": %v is not supported, want 1", field, *r.PartialRotaryFactor)
	}
	typ := "default"
	switch {
	case r.RopeType != nil:
		typ = *r.RopeType
	case r.Type != nil:
		typ = *r.Type
	}
	switch typ {
	case "default":
		return nil, nil
	case "llama3":
	default:
		return nil, fmt.Errorf("field \"%s.rope_type\": %q is not supported, want \"llama3\" or \"default\"", field, typ)
	}
	s := &RopeScaling{Type: typ}
	var missing []string
	for _, f := range []struct {
		name string
		p    *float64
		to   *float64
	}{{"factor", r.Factor, &s.Factor}, {"low_freq_factor", r.LowFreqFactor, &s.LowFreqFactor}, {"high_freq_factor", r.HighFreqFactor, &s.HighFreqFactor}} {
		if f.p == nil {
			missing = append(missing, f.name)
		} else {
			*f.to = *f.p
		}
	}
	if r.OriginalMaxPos == nil {
		missing = append(missing, "original_max_position_embeddings")
	} else {
		s.OriginalMaxPos = *r.OriginalMaxPos
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("field %q: rope_type \"llama3\" needs %s", field, strings.Join(missing, ", "))
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("field %q: %w", field, err)
	}
	return s, nil
}

// WriteJSON writes c as a Hugging Face config.json, atomically.
func (c Config) WriteJSON(path string) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := c.marshalHF()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("model: write config: %w", err)
	}
	return nil
}

func (c Config) marshalHF() ([]byte, error) {
	c = c.Normalized()
	ip := func(v int) *int { return &v }
	fp := func(v float64) *float64 { return &v }
	bp := func(v bool) *bool { return &v }
	h := hfConfig{ModelType: c.ModelType, VocabSize: ip(c.Vocab), TieWordEmbedding: bp(c.TieEmbeddings), TorchDType: c.DType}
	if c.BOS >= 0 {
		h.BOS = ip(c.BOS)
	}
	if c.EOS >= 0 {
		h.EOS = c.EOS
	}
	switch c.Family {
	case "gpt":
		h.Architectures = []string{"GPT2LMHeadModel"}
		h.NEmbd, h.NLayer, h.NHead = ip(c.Dim), ip(c.Layers), ip(c.Heads)
		h.NPositions, h.NInner = ip(c.MaxSeq), ip(c.Hidden)
		h.ActFunction, h.LayerNormEp = c.Activation, fp(c.NormEps)
	case "llama":
		switch c.ModelType {
		case "qwen2":
			h.Architectures = []string{"Qwen2ForCausalLM"}
		case "qwen3":
			h.Architectures = []string{"Qwen3ForCausalLM"}
			h.AttentionBias = bp(c.AttentionBias)
			h.UseSlidingWindow = bp(false)
		default:
			h.Architectures = []string{"LlamaForCausalLM"}
			h.AttentionBias = bp(c.AttentionBias)
			h.MLPBias = bp(false)
		}
		h.HiddenSize, h.NumLayers, h.NumHeads = ip(c.Dim), ip(c.Layers), ip(c.Heads)
		h.NumKVHeads, h.Intermediate, h.MaxPositions = ip(c.KVHeads), ip(c.Hidden), ip(c.MaxSeq)
		h.HiddenAct, h.RMSNormEps, h.RopeTheta = c.Activation, fp(c.NormEps), fp(c.RopeTheta)
		h.HeadDim = ip(c.HeadDim())
		scaling := json.RawMessage("null")
		if s := c.RopeScaling; s != nil {
			var err error
			scaling, err = json.Marshal(map[string]any{"rope_type": s.Type, "factor": s.Factor,
				"low_freq_factor": s.LowFreqFactor, "high_freq_factor": s.HighFreqFactor,
				"original_max_position_embeddings": s.OriginalMaxPos})
			if err != nil {
				return nil, fmt.Errorf("model: encode config: %w", err)
			}
		}
		h.RopeScaling = &scaling
	}
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("model: encode config: %w", err)
	}
	return append(data, '\n'), nil
}
