package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hacrl/hacrl/config"
)

// resumeMayChange names, by YAML key, the top-level config fields a resumed
// run may change, because they do not change what the agents learn: where
// the run is written, how long it goes on, how it is measured, logged and
// computed. Every other field is training-relevant: each checkpoint stores it
// with its hash (state.json "config", "config_hash"), and --resume refuses a
// config that differs in any of them, naming the keys.
//
// A new top-level config field is training-relevant unless listed here: add
// one line for a field that only concerns logging, output or speed. Give new
// fields `json:",omitempty"`, so that configs without them keep the hash of
// the checkpoints written before the field existed.
var resumeMayChange = []string{
	"name",       // the run's label
	"out",        // the output directory (it may have been moved)
	"steps",      // how long to train: a resumed run may go further
	"eval",       // the evaluation sets and schedule: measured, not trained on
	"checkpoint", // the checkpoint schedule
	"backend",    // how the tensors are computed
	"engine",     // which engine runs the models
	"rollouts",   // readable rollout logs: written, not trained on
	"tracking",   // experiment trackers (MLflow): where metrics are sent, not what is learned
}

// trainingConfig is the training-relevant part of cfg as canonical JSON: a
// copy with the resumeMayChange fields zeroed, marshalled by encoding/json
// (struct fields in declaration order, map keys sorted).
func trainingConfig(cfg *config.Config) (json.RawMessage, error) {
	c := *cfg
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		if slices.Contains(resumeMayChange, yamlKey(v.Type().Field(i))) {
			v.Field(i).SetZero()
		}
	}
	// An agent's rollout engine says where its responses are sampled, not
	// what it learns: a resumed run may move to another server.
	c.Agents = slices.Clone(c.Agents)
	for i := range c.Agents {
		c.Agents[i].Rollout = nil
	}
	data, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("config hash: %w", err)
	}
	return data, nil
}

// yamlKey is the YAML key of a struct field.
func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

// configHash is "sha256:" and the hex SHA-256 of a training config.
func configHash(training json.RawMessage) string {
	sum := sha256.Sum256(training)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// configDiff lists the keys in which two training configs (JSON) differ, as
// "agents[0].optimizer.lr: checkpoint 0.0001, config 0.0002", sorted by key,
// each with the override that would make the config match the checkpoint:
// (--set 'agents[0].optimizer.lr=0.0001' matches the checkpoint).
func configDiff(checkpoint, current json.RawMessage) ([]string, error) {
	diffs, err := diffKeys(checkpoint, current, "checkpoint")
	if err != nil {
		return nil, err
	}
	cur, err := flattenJSON(current)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(diffs))
	for i, d := range diffs {
		out[i] = d.String("checkpoint", "config")
		switch {
		case !d.inA:
			out[i] += " (the checkpoint's config leaves it out: so must this one)"
		case !d.inB && !hasEntry(cur, d.key):
			// A list entry the config lacks (an agent left out): no --set
			// can add one key of it.
		default:
			out[i] += fmt.Sprintf(" (%s matches the checkpoint)", config.SetFlag(d.key+"="+d.a))
		}
	}
	return out, nil
}

// hasEntry reports whether the flattened config has the list entry that key
// is in (agents[2] for agents[2].optimizer.lr); true for a key in no list.
func hasEntry(flat map[string]string, key string) bool {
	i := strings.LastIndex(key, "]")
	if i < 0 {
		return true
	}
	entry := key[:i+1]
	for k := range flat {
		if strings.HasPrefix(k, entry) {
			return true
		}
	}
	return false
}

// keyDiff is a leaf in which two configs differ: its key path and its JSON
// text in each (absent when not inA, not inB).
type keyDiff struct {
	key, a, b string
	inA, inB  bool
}

func (d keyDiff) String(nameA, nameB string) string {
	a, b := d.a, d.b
	if !d.inA {
		a = "unset"
	}
	if !d.inB {
		b = "unset"
	}
	return fmt.Sprintf("%s: %s %s, %s %s", d.key, nameA, a, nameB, b)
}

// TrainingConfig is the training-relevant part of cfg as canonical JSON, as
// checkpoints record it and ConfigHash hashes it.
func TrainingConfig(cfg *config.Config) (json.RawMessage, error) { return trainingConfig(cfg) }

// DiffTrainingConfigs lists the keys in which two training configs (JSON,
// as TrainingConfig makes them) differ, as "agents[0].optimizer.lr: NAMEA
// 0.0001, NAMEB 0.0002", sorted by key.
func DiffTrainingConfigs(a0, b0 json.RawMessage, nameA, nameB string) ([]string, error) {
	diffs, err := diffKeys(a0, b0, nameA)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(diffs))
	for i, d := range diffs {
		out[i] = d.String(nameA, nameB)
	}
	return out, nil
}

// diffKeys lists the leaves in which two training configs differ, sorted
// by key.
func diffKeys(a0, b0 json.RawMessage, nameA string) ([]keyDiff, error) {
	a, err := flattenJSON(a0)
	if err != nil {
		return nil, fmt.Errorf("%s config: %w", nameA, err)
	}
	b, err := flattenJSON(b0)
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []keyDiff
	for _, k := range keys {
		x, inA := a[k]
		y, inB := b[k]
		if inA && inB && x == y {
			continue
		}
		out = append(out, keyDiff{key: k, a: x, b: y, inA: inA, inB: inB})
	}
	return out, nil
}

// flattenJSON maps every leaf of a JSON document to its path (a.b[2].c) and
// its JSON text.
func flattenJSON(data []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, e)
			}
		case []any:
			if len(x) == 0 {
				out[path] = "[]"
			}
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		default:
			text, _ := json.Marshal(x) // a decoded JSON value marshals
			out[path] = string(text)
		}
	}
	walk("", v)
	return out, nil
}
