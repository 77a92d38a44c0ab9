// Package experiment runs a grid of training runs — heterogeneity settings ×
// methods × seeds, plus ablations on one setting — and turns their metrics
// into the paper's kind of report: a Table 1 of held-out accuracy per agent
// and method (mean ± std over seeds), ablation tables, learning curves per
// setting, and the rollout cost of every method.
//
// Every cell of the grid is an ordinary `hacrl train` run in its own output
// directory, started as a child process of the running binary. A cell is
// finished when its done.json exists; an unfinished cell is resumed from its
// latest checkpoint, so a grid interrupted at any moment picks up where it
// stopped. Cells run one after another or in parallel processes, which share
// the cores between them.
//
// Archive keeps a grid's record without its weights: each finished cell's
// metrics (gzipped), done.json and cell.yaml, laid out like the grid's own
// directory, so that the report can be rebuilt from the archive and a grid
// run over it trains only the cells it lacks. The report's statistics are
// paired by seed: the difference of two methods for the same agent and seed,
// its mean ± std and a Student's t 95% confidence interval over seeds, over all
// agents and per setting. Its diagnostics are means over a run and over its
// first and last tenth of steps, which show how the agents' interaction drifts.
package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/config"
	"go.yaml.in/yaml/v3"
)

// Config is an experiment grid.
type Config struct {
	Name     string  `yaml:"name"`
	Out      string  `yaml:"out"`
	Seeds    []int64 `yaml:"seeds"`
	Parallel int     `yaml:"parallel"` // cells at once (default 1)
	// Run is the template of every cell: steps, task, batch, eval,
	// checkpoint... Its agents, method, seed and out are set per cell.
	Run      config.Config `yaml:"run"`
	Settings []Setting     `yaml:"settings"`
	Methods  []string      `yaml:"methods"` // default grpo, gspo, gspo2x, naive, hacpo
	// MethodVariants run on every setting after the methods, each a name
	// (its label in the report) and a method section, e.g.
	// {name: hacpo-original, method: {name: hacpo, semantics: original}}.
	// The report compares each with the method it varies (or its against).
	MethodVariants []Variant  `yaml:"method_variants"`
	Ablations      *Ablations `yaml:"ablations"`
	// Compare adds comparisons to the report's paired differences, each
	// [a, b]: a method or variant against another (or "initial"), e.g.
	// [hacpo-capable, gspo3x] where the comparisons a variant gets by
	// default do not reach the baseline of a setting.
	Compare [][]string `yaml:"compare"`
}

// Setting is one heterogeneity setting: the agents that train together.
type Setting struct {
	Name   string         `yaml:"name"`
	Agents []config.Agent `yaml:"agents"`
}

// Ablations are method variants run on one setting.
type Ablations struct {
	Setting  string    `yaml:"setting"`
	Variants []Variant `yaml:"variants"`
}

// Variant is one ablation or method variant: a name and a method section.
type Variant struct {
	Name   string        `yaml:"name"`
	Method config.Method `yaml:"method"`
	// Settings, for a method variant, are the settings it runs on (default:
	// all), e.g. GSPO×3 only where three agents train together.
	Settings []string `yaml:"settings"`
	// Against, for a method variant, is the method or variant the report
	// compares it with (default: the preset it varies, Method.Name), e.g.
	// grpo for {name: dapo, method: {name: dapo}, against: grpo}.
	Against string `yaml:"against"`
}

// runsOn reports whether method m (a method, a variant's name, or
// "initial") has cells on setting s.
func (c *Config) runsOn(s, m string) bool {
	methods := c.Methods
	if len(methods) == 0 {
		methods = DefaultMethods // as Load fills them in
	}
	if m == "initial" || slices.Contains(methods, m) {
		return true
	}
	for _, v := range c.MethodVariants {
		if v.Name == m {
			return len(v.Settings) == 0 || slices.Contains(v.Settings, s)
		}
	}
	if a := c.Ablations; a != nil && a.Setting == s {
		for _, v := range a.Variants {
			if v.Name == m {
				return true
			}
		}
	}
	return false
}

// MainMethods are the methods and method variants every setting runs, in
// the report's order.
func (c *Config) MainMethods() []string {
	out := append([]string(nil), c.Methods...)
	for _, v := range c.MethodVariants {
		out = append(out, v.Name)
	}
	return out
}

// DefaultMethods are the paper's baselines and HACPO (§4.4).
var DefaultMethods = []string{"grpo", "gspo", "gspo2x", "naive", "hacpo"}

// Load reads and checks an experiment file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		return nil, fmt.Errorf("experiment %s: not valid YAML: %w", path, err)
	}
	if err := config.CheckKeys(&root, reflect.TypeOf(Config{})); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	var c Config
	if err := root.Decode(&c); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	if len(c.Methods) == 0 {
		c.Methods = DefaultMethods
	}
	if c.Parallel == 0 {
		c.Parallel = 1
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", path, err)
	}
	return &c, nil
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Out == "" {
		bad("out: required")
	}
	if len(c.Seeds) == 0 {
		bad("seeds: at least one seed")
	}
	if c.Parallel < 1 {
		bad("parallel: must be >= 1")
	}
	if len(c.Settings) == 0 {
		bad("settings: at least one setting")
	}
	names := map[string]bool{}
	for i, s := range c.Settings {
		if s.Name == "" || strings.ContainsAny(s.Name, `/\ `) {
			bad("settings[%d].name: required, without '/' or spaces", i)
		}
		if names[s.Name] {
			bad("settings[%d].name: %q used twice", i, s.Name)
		}
		names[s.Name] = true
	}
	methods := map[string]bool{}
	for _, m := range c.Methods {
		methods[m] = true
	}
	for i, v := range c.MethodVariants {
		if v.Name == "" || strings.ContainsAny(v.Name, `/\ `) || methods[v.Name] || v.Name == "initial" {
			bad("method_variants[%d].name: %q: required, without '/' or spaces, and not a method's name or used twice", i, v.Name)
		}
		methods[v.Name] = true
		for _, name := range v.Settings {
			if !names[name] {
				bad("method_variants[%d].settings: %q is not one of the settings", i, name)
			}
		}
	}
	for i, v := range c.MethodVariants {
		if v.Against != "" && (!methods[v.Against] || v.Against == v.Name) {
			bad("method_variants[%d].against: %q is not another method or variant of the grid", i, v.Against)
		}
	}
	for i, p := range c.Compare {
		if len(p) != 2 {
			bad("compare[%d]: want a pair [a, b], got %d names", i, len(p))
			continue
		}
		if !methods[p[0]] || !(methods[p[1]] || p[1] == "initial") || p[0] == p[1] {
			bad("compare[%d]: %q against %q: each must be a method or variant of the grid (the second may be initial), and they must differ", i, p[0], p[1])
		}
	}
	if a := c.Ablations; a != nil {
		if !names[a.Setting] {
			bad("ablations.setting: %q is not one of the settings", a.Setting)
		}
		for i, v := range a.Variants {
			if len(v.Settings) > 0 {
				bad("ablations.variants[%d].settings: an ablation runs on ablations.setting only", i)
			}
		}
	}
	// Every cell's config must be valid: build them all now.
	for _, cell := range c.Cells() {
		if _, err := cell.RunConfig(c); err != nil {
			bad("cell %s: %v", cell.ID(), err)
			break
		}
	}
	return errors.Join(errs...)
}

// Cell is one run of the grid.
type Cell struct {
	Setting string
	Method  string // a method name, or an ablation variant's name
	Seed    int64
	Variant *Variant // nil for a main-grid method
}

// ID names the cell: setting/method/seedN.
func (c Cell) ID() string { return fmt.Sprintf("%s/%s/seed%d", c.Setting, c.Method, c.Seed) }

// Cells lists the grid: every setting × method (and method variant) ×
// seed, then every ablation variant × seed on the ablation setting.
func (c *Config) Cells() []Cell {
	var out []Cell
	for _, s := range c.Settings {
		for _, m := range c.Methods {
			for _, seed := range c.Seeds {
				out = append(out, Cell{Setting: s.Name, Method: m, Seed: seed})
			}
		}
		for i := range c.MethodVariants {
			v := &c.MethodVariants[i]
			if !c.runsOn(s.Name, v.Name) {
				continue
			}
			for _, seed := range c.Seeds {
				out = append(out, Cell{Setting: s.Name, Method: v.Name, Seed: seed, Variant: v})
			}
		}
	}
	if a := c.Ablations; a != nil {
		for i := range a.Variants {
			v := &a.Variants[i]
			for _, seed := range c.Seeds {
				out = append(out, Cell{Setting: a.Setting, Method: v.Name, Seed: seed, Variant: v})
			}
		}
	}
	return out
}

// RunConfig is the cell's training config.
func (cell Cell) RunConfig(c *Config) (*config.Config, error) {
	rc := c.Run // shallow copy; the slices below are replaced, not mutated
	for _, s := range c.Settings {
		if s.Name == cell.Setting {
			rc.Agents = append([]config.Agent(nil), s.Agents...)
		}
	}
	rc.Seed = cell.Seed
	rc.Name = c.Name + "/" + cell.ID()
	if cell.Variant != nil {
		rc.Method = cell.Variant.Method
	} else {
		rc.Method = config.Method{Name: cell.Method}
	}
	data, err := yaml.Marshal(&rc)
	if err != nil {
		return nil, err
	}
	// Round-trip through the strict parser: defaults and validation exactly
	// as `hacrl train` will see the file.
	return config.Parse(data)
}
