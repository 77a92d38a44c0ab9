package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/internal/kernel"
)

// LoRA configures low-rank adapters (Hu et al., 2021) on a model's linear
// layers, as PEFT's LoraConfig does: a targeted layer y = x·Wᵀ becomes
// y = x·Wᵀ + (Alpha/Rank)·x·Aᵀ·Bᵀ with A [Rank,in] and B [out,Rank]. The
// base weights W stay frozen; a Trainer of a model with adapters updates A
// and B only.
type LoRA struct {
	Rank  int     // r, the adapters' inner dimension (> 0)
	Alpha float64 // lora_alpha: the adapters' output is scaled by Alpha/Rank (> 0)
	// Targets names the adapted modules as PEFT's target_modules list does:
	// a module is adapted when its name (model.layers.0.self_attn.q_proj,
	// transformer.h.0.attn.c_attn, …) equals a target or ends with "." and
	// the target. ["all-linear"] adapts every linear layer of the blocks
	// (not the LM head).
	Targets []string
	// Pattern, instead of Targets, is a regular expression the whole module
	// name must match: PEFT's target_modules given as one string.
	Pattern string
	// RSLoRA scales by Alpha/√Rank instead (PEFT's use_rslora).
	RSLoRA bool
	// Exclude names modules left without adapters even when targeted, as
	// PEFT's exclude_modules list does (matched as Targets are);
	// ExcludePattern, instead, is a regular expression the whole name must
	// match (exclude_modules given as one string).
	Exclude        []string
	ExcludePattern string
	// Layers, when set, limits the modules a Targets name selects by its
	// last part (q_proj) to these blocks, as PEFT's layers_to_transform
	// does; a target that is a module's whole path is adapted in any block.
	// A module's block is the first number of its path that follows a part
	// matching one of LayersPattern (PEFT's layers_pattern), or any part
	// when LayersPattern is empty.
	Layers        []int
	LayersPattern []string
}

// AllLinear is the Targets entry that adapts every linear layer of the
// blocks.
const AllLinear = "all-linear"

// scale is the factor of the adapters' output.
func (c LoRA) scale() float64 {
	if c.RSLoRA {
		return c.Alpha / math.Sqrt(float64(c.Rank))
	}
	return c.Alpha / float64(c.Rank)
}

// Validate reports a rank or alpha out of range or an empty target list.
func (c LoRA) Validate() error {
	switch {
	case c.Rank <= 0:
		return fmt.Errorf("model: LoRA rank %d, want > 0", c.Rank)
	case !(c.Alpha > 0) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("model: LoRA alpha %v, want > 0", c.Alpha)
	case len(c.Targets) == 0 && c.Pattern == "":
		return fmt.Errorf("model: LoRA target modules: empty, want module names (q_proj, …) or %q", AllLinear)
	case len(c.Targets) > 0 && c.Pattern != "":
		return fmt.Errorf("model: LoRA target modules: both names %q and a pattern %q, want one of them", c.Targets, c.Pattern)
	}
	if c.Pattern != "" {
		if _, err := regexp.Compile("^(?:" + c.Pattern + ")$"); err != nil {
			return fmt.Errorf("model: LoRA target modules %q: not a regular expression: %v", c.Pattern, err)
		}
	}
	if len(c.Layers) > 0 && (c.Pattern != "" || slices.Contains(c.Targets, AllLinear)) {
		return fmt.Errorf("model: LoRA layers %v: need target modules given as names, not %q (as PEFT's layers_to_transform)", c.Layers, c.Pattern+strings.Join(c.Targets, ""))
	}
	for _, p := range c.LayersPattern {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("model: LoRA layers pattern %q: not a regular expression: %v", p, err)
		}
	}
	if len(c.Exclude) > 0 && c.ExcludePattern != "" {
		return fmt.Errorf("model: LoRA excluded modules: both names %q and a pattern %q, want one of them", c.Exclude, c.ExcludePattern)
	}
	if c.ExcludePattern != "" {
		if _, err := regexp.Compile("^(?:" + c.ExcludePattern + ")$"); err != nil {
			return fmt.Errorf("model: LoRA excluded modules %q: not a regular expression: %v", c.ExcludePattern, err)
		}
	}
	return nil
}

// moduleKinds are the linear layers of a block, by family, in block order:
// the name Hugging Face gives the module and the product (decoderLayer
// field) whose output columns it makes.
var moduleKinds = map[string][]struct{ name, proj string }{
	"llama": {
		{"self_attn.q_proj", "qkv"}, {"self_attn.k_proj", "qkv"}, {"self_attn.v_proj", "qkv"},
		{"self_attn.o_proj", "out"},
		{"mlp.gate_proj", "up"}, {"mlp.up_proj", "up"},
		{"mlp.down_proj", "down"},
	},
	"gpt": {
		{"attn.c_attn", "qkv"}, {"attn.c_proj", "out"}, {"mlp.c_fc", "up"}, {"mlp.c_proj", "down"},
	},
}

// loraModule is one adapted linear layer: its Hugging Face module path, the
// product it belongs to, and its place there: output columns [lo,hi) of
// block layer's proj, whose input has in columns.
type loraModule struct {
	path   string
	layer  int
	proj   string // "qkv", "out", "up" or "down"
	lo, hi int
	in     int
}

// out is the module's number of outputs.
func (mod loraModule) out() int { return mod.hi - mod.lo }

// modulePath is the module's name in a Hugging Face model of c's
// architecture (LlamaForCausalLM, Qwen2/3ForCausalLM, GPT2LMHeadModel).
func (c Config) modulePath(layer int, name string) string {
	if c.Family == "gpt" {
		return fmt.Sprintf("transformer.h.%d.%s", layer, name)
	}
	return fmt.Sprintf("model.layers.%d.%s", layer, name)
}

// loraModules lists the modules of c that l targets, in block order, or an
// error when none is.
func (c Config) loraModules(l LoRA) ([]loraModule, error) {
	match, err := l.matcher()
	if err != nil {
		return nil, err
	}
	d, dh, hid := c.Dim, c.HeadDim(), c.Hidden
	q, kv := c.Heads*dh, c.KVHeads*dh
	// The output columns and inputs of each module within its product.
	span := map[string][3]int{
		"self_attn.q_proj": {0, q, d}, "self_attn.k_proj": {q, q + kv, d}, "self_attn.v_proj": {q + kv, q + 2*kv, d},
		"self_attn.o_proj": {0, d, q},
		"mlp.gate_proj":    {0, hid, d}, "mlp.up_proj": {hid, 2 * hid, d},
		"mlp.down_proj": {0, d, hid},
		"attn.c_attn":   {0, 3 * d, d}, "attn.c_proj": {0, d, d}, "mlp.c_fc": {0, hid, d}, "mlp.c_proj": {0, d, hid},
	}
	var mods []loraModule
	for layer := range c.Layers {
		for _, k := range moduleKinds[c.Family] {
			path := c.modulePath(layer, k.name)
			if !match(path) {
				continue
			}
			s := span[k.name]
			mods = append(mods, loraModule{path: path, layer: layer, proj: k.proj, lo: s[0], hi: s[1], in: s[2]})
		}
	}
	if len(mods) == 0 {
		what := fmt.Sprintf("%q", l.Targets)
		if l.Pattern != "" {
			what = fmt.Sprintf("pattern %q", l.Pattern)
		}
		return nil, fmt.Errorf("model: LoRA target modules %s match no linear layer of this %s model (its blocks have %s)",
			what, c.Family, strings.Join(moduleNames(c.Family), ", "))
	}
	return mods, nil
}

// moduleNames are the short names of a family's block modules.
func moduleNames(family string) []string {
	var names []string
	for _, k := range moduleKinds[family] {
		n := k.name[strings.LastIndex(k.name, ".")+1:]
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// matcher returns the test of a module path against l's targets and
// exclusions.
func (l LoRA) matcher() (func(string) bool, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	target := namesOrPattern(l.Targets, l.Pattern)
	if l.Pattern == "" && slices.Contains(l.Targets, AllLinear) {
		target = func(string) bool { return true }
	}
	if len(l.Layers) > 0 {
		named, index := target, l.layerIndex()
		target = func(path string) bool {
			if slices.Contains(l.Targets, path) {
				return true
			}
			n, ok := index(path)
			return ok && named(path) && slices.Contains(l.Layers, n)
		}
	}
	if len(l.Exclude) == 0 && l.ExcludePattern == "" {
		return target, nil
	}
	exclude := namesOrPattern(l.Exclude, l.ExcludePattern)
	return func(path string) bool { return target(path) && !exclude(path) }, nil
}

// layerIndex returns the block index PEFT reads from a module path for
// layers_to_transform: the first number part after any part, or after a
// part matching one of LayersPattern (checked by Validate).
func (l LoRA) layerIndex() func(string) (int, bool) {
	var res []*regexp.Regexp
	if len(l.LayersPattern) == 0 {
		res = append(res, regexp.MustCompile(`^.*?\.[^.]*\.(\d+)\.`))
	}
	for _, p := range l.LayersPattern {
		res = append(res, regexp.MustCompile(`^(?:|.*?\.)(?:`+p+`)\.(\d+)\.`))
	}
	return func(path string) (int, bool) {
		for _, re := range res {
			if m := re.FindStringSubmatch(path); m != nil {
				n, err := strconv.Atoi(m[1])
				return n, err == nil
			}
		}
		return 0, false
	}
}

// namesOrPattern returns PEFT's test of a module path against a list of
// names (the path is one, or ends with "." and one) or, when pattern is
// set, a regular expression the whole path must match (checked by
// Validate).
func namesOrPattern(names []string, pattern string) func(string) bool {
	if pattern != "" {
		return regexp.MustCompile("^(?:" + pattern + ")$").MatchString
	}
	return func(path string) bool {
		for _, t := range names {
			if path == t || strings.HasSuffix(path, "."+t) {
				return true
			}
		}
		return false
	}
}

// PEFT's names of an adapter's tensors, under the model it wraps.
const (
	peftPrefix  = "base_model.model."
	loraASuffix = ".lora_A.weight"
	loraBSuffix = ".lora_B.weight"
)

// adapters are a model's LoRA adapters: per module an A [r,in] and a B
// [out,r]. Like the base parameters (host.go) they are in one place at a
// time, moved by the first pass of the other engine: flat on the host in
// the order of specs (the file layout), for the native engine, or as
// backend tensors in the graph layout (A [in,r], B [r,out]), for the
// graphs. The A matrices of the modules of one product (llama's q, k and
// v; gate and up) are adjacent, so that the product's adapters take their
// input in one product (see lowRank). The model's mu guards host and
// params.
type adapters struct {
	cfg    LoRA
	mods   []loraModule
	specs  []paramSpec
	host   []float32         // nil while params hold the adapters
	params []*tensors.Tensor // nil while host holds them
}

// onHost returns the adapters' host buffer, moving them there first if
// the tensors hold them. The model's mu must be held exclusively, or
// shared while the host holds them.
func (ad *adapters) onHost() []float32 {
	if ad.host == nil {
		ad.host, ad.params = flatFromTensors(ad.specs, ad.params), nil
	}
	return ad.host
}

// execKey is what the name of an Exec built for a model with ad says of
// them: their whole configuration (every field, in Go syntax), which fixes
// the modules, ranks and scale the graph is built with.
func (ad *adapters) execKey() string {
	return fmt.Sprintf("+lora%#v", ad.cfg)
}

// productGroups splits mods (in block order) into the runs that adapt one
// product of one layer: llama's q, k and v projections, its gate and up,
// or a product's single module.
func productGroups(mods []loraModule) [][]loraModule {
	var groups [][]loraModule
	for lo := 0; lo < len(mods); {
		hi := lo + 1
		for hi < len(mods) && mods[hi].layer == mods[lo].layer && mods[hi].proj == mods[lo].proj {
			hi++
		}
		groups = append(groups, mods[lo:hi])
		lo = hi
	}
	return groups
}

// adapterSpecs lists the adapters' tensors for mods: for each product of
// each layer, the A of every module it adapts, then their B.
func adapterSpecs(mods []loraModule, r int) []paramSpec {
	linear := func(name string, out, in int) paramSpec {
		return paramSpec{name: name, shape: []int{in, out}, decay: true, transposed: true}
	}
	var specs []paramSpec
	for _, group := range productGroups(mods) {
		for _, mod := range group {
			specs = append(specs, linear(peftPrefix+mod.path+loraASuffix, r, mod.in))
		}
		for _, mod := range group {
			specs = append(specs, linear(peftPrefix+mod.path+loraBSuffix, mod.out(), r))
		}
	}
	return specs
}

// newAdapters returns c's adapters for the model config, initialized as
// PEFT does: A from the uniform distribution on ±1/√in (torch's
// kaiming_uniform_ with a = √5) drawn from a generator seeded with seed,
// B zero, so that the adapted model computes exactly what its base does.
func (c Config) newAdapters(l LoRA, seed int64) (*adapters, error) {
	mods, err := c.loraModules(l)
	if err != nil {
		return nil, err
	}
	ad := &adapters{cfg: l, mods: mods, specs: adapterSpecs(mods, l.Rank)}
	_, total := flatLayout(ad.specs)
	ad.host = make([]float32, total)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c6f7261)) // "lora"
	for i, v := range flatViews(ad.specs, ad.host) {
		s := ad.specs[i]
		if !strings.HasSuffix(s.name, loraASuffix) {
			continue
		}
		bound := 1 / math.Sqrt(float64(s.shape[0])) // shape is [in,r]
		for j := range v {
			v[j] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return ad, nil
}

// AddLoRA gives m fresh adapters of configuration l (see newAdapters; seed
// draws the A matrices), after which the base weights are frozen: a
// Trainer of m updates the adapters only, Generate and Score run the
// adapted model, and Base is the model without them. The adapted model
// runs on either engine (SetEngine). m must be float32 and have none yet.
func (m *Model) AddLoRA(l LoRA, seed int64) error {
	if err := m.canAdapt(false); err != nil {
		return err
	}
	ad, err := m.cfg.newAdapters(l, seed)
	if err != nil {
		return err
	}
	m.setAdapters(ad)
	return nil
}

// canAdapt reports why adapters cannot be added to m, if they cannot;
// with replace, adapters m has already do not stop it.
func (m *Model) canAdapt(replace bool) error {
	if m.dtype != dtypes.Float32 {
		return fmt.Errorf("model: LoRA adapters need a float32 model, not %s", m.dtype)
	}
	if m.lora != nil && !replace {
		return fmt.Errorf("model: the model has LoRA adapters already")
	}
	if m.baseOf != nil {
		return fmt.Errorf("model: the base of a model with LoRA adapters is frozen: adapt a Clone of it")
	}
	return nil
}

// setAdapters installs ad and drops the decoder built without it.
func (m *Model) setAdapters(ad *adapters) {
	m.mu.Lock()
	m.lora, m.dec = ad, nil
	m.mu.Unlock()
}

// LoRA returns the configuration of m's adapters, if it has any.
func (m *Model) LoRA() (LoRA, bool) {
	if m.lora == nil {
		return LoRA{}, false
	}
	return m.lora.cfg, true
}

// NumTrainable is the number of scalar parameters a Trainer of m updates:
// its adapters' (r·(in+out) per adapted module) when it has them, else
// NumParams.
func (m *Model) NumTrainable() int64 {
	if m.lora == nil {
		return m.NumParams()
	}
	var n int64
	for _, s := range m.lora.specs {
		n += int64(s.size())
	}
	return n
}

// LoRAModules returns the short names (q_proj, c_attn, …) of the modules
// m's adapters adapt, each once, in block order; nil without adapters.
func (m *Model) LoRAModules() []string {
	if m.lora == nil {
		return nil
	}
	var names []string
	for _, mod := range m.lora.mods {
		n := mod.path[strings.LastIndex(mod.path, ".")+1:]
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// Base returns m without its adapters: a model reading m's frozen base
// weights (no copy, wherever either engine has moved them), for instance
// the KL reference of a LoRA agent. It takes no Trainer and no adapters;
// MergeLoRA on m changes what it computes. It returns m itself when m has
// no adapters.
func (m *Model) Base() *Model {
	if m.lora == nil {
		return m
	}
	b := blankModel(m.backend, m.cfg, m.dtype)
	b.engine, b.gen, b.bf16 = m.engine, m.gen, m.bf16
	b.baseOf = m
	return b
}

// MergeLoRA folds m's adapters into its weights, W += scale·B·A per adapted
// module (rounded once to float32), and drops them: m then computes what
// it computed with them, within float32 rounding, with no adapters.
func (m *Model) MergeLoRA() error {
	if m.lora == nil {
		return fmt.Errorf("model: merge: the model has no LoRA adapters")
	}
	if m.frozen != nil {
		return fmt.Errorf("model: merge: the base weights are held in bfloat16 (frozen dtype): merge into a float32 base, loaded from the checkpoint")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.host == nil {
		m.host, m.params = flatFromTensors(m.specs, m.params), nil
	}
	w := map[string][]float32{}
	for i, v := range flatViews(m.specs, m.host) {
		w[m.specs[i].name] = v
	}
	ad := m.lora
	av := map[string][]float32{}
	for i, v := range flatViews(ad.specs, ad.onHost()) {
		av[ad.specs[i].name] = v
	}
	r, scale := ad.cfg.Rank, ad.cfg.scale()
	for _, mod := range ad.mods {
		a, b := av[peftPrefix+mod.path+loraASuffix], av[peftPrefix+mod.path+loraBSuffix]
		W := w[strings.TrimPrefix(mod.path, "transformer.")+".weight"] // our GPT-2 names have no "transformer."
		in, out := mod.in, mod.out()
		linear := m.cfg.Family != "gpt" // Linear [out,in]; GPT-2's Conv1D is [in,out]
		kernel.Parallel(out, 16, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				for i := range in {
					var s float64
					for k := range r {
						s += float64(b[j*r+k]) * float64(a[k*in+i])
					}
					if linear {
						W[j*in+i] = float32(float64(W[j*in+i]) + scale*s)
					} else {
						W[i*out+j] = float32(float64(W[i*out+j]) + scale*s)
					}
				}
			}
		})
	}
	m.lora, m.dec, m.baseDec = nil, nil, nil
	return nil
}
