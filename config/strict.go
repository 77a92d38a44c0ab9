package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkKeys walks a YAML node against the Go type it will be decoded into and
// reports the first key that the type does not have, by its path
// (e.g. "agents[1].sampling.temprature"), with the valid keys listed; a value
// of the wrong type (including a fraction or a NaN for an integer, and NaN or
// Inf for a number); and a value that a default would replace (see
// checkExplicit). Errors name the place through src (a line of the file, or
// a --set); when src is not nil it records every key's line by path.
func checkKeys(n *yaml.Node, t reflect.Type, path string, src *source) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return checkKeys(n.Content[0], t, path, src)
	}
	if n.Kind == yaml.AliasNode {
		return checkKeys(n.Alias, t, path, src)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) { // a type that reads itself (Modules)
		if n.Tag == "!!null" {
			return nil
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return fmt.Errorf("%s: %v", src.at(path, n.Line), err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s: expected a mapping of keys, got %s", src.at(path, n.Line), describe(n))
		}
		fields := yamlFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if seen[k.Value] {
				return fmt.Errorf("%s: key given twice", src.at(p, k.Line))
			}
			seen[k.Value] = true
			f, ok := fields[k.Value]
			if !ok {
				valid := sortedKeys(fields)
				return fmt.Errorf("%s: unknown key; valid keys here: %s%s", src.at(p, k.Line), strings.Join(valid, ", "), didYouMean(k.Value, valid))
			}
			src.record(p, k.Line)
			if err := checkKeys(v, f.Type, p, src); err != nil {
				return err
			}
			if err := checkExplicit(v, f, p, src); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s: expected a list, got %s", src.at(path, n.Line), describe(n))
		}
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			src.record(p, c.Line)
			if err := checkKeys(c, t.Elem(), p, src); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s: expected a mapping, got %s", src.at(path, n.Line), describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), src); err != nil {
				return err
			}
		}
	default:
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			return fmt.Errorf("%s: expected a single value (%s), got %s", src.at(path, n.Line), typeName(t), describe(n))
		}
		return checkScalar(n, t, path, src)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkScalar decodes a scalar alone, so that a type error names its path.
// yaml.v3 would truncate 2.5 into an int field and accept .nan and .inf into
// float fields; both are refused here.
func checkScalar(n *yaml.Node, t reflect.Type, path string, src *source) error {
	if n.Tag == "!!null" {
		return nil
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil {
		return fmt.Errorf("%s: cannot read %q as %s", src.at(path, n.Line), n.Value, typeName(t))
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.ShortTag() == "!!float" {
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil || f != math.Trunc(f) {
				return fmt.Errorf("%s: cannot read %q as %s: not a whole number", src.at(path, n.Line), n.Value, typeName(t))
			}
		}
	case reflect.Float32, reflect.Float64:
		if f := v.Elem().Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: cannot read %q as %s: must be finite", src.at(path, n.Line), n.Value, typeName(t))
		}
	}
	return nil
}

// checkExplicit refuses a value given explicitly that a default would
// silently replace. A non-pointer field with a default (a default or derived
// tag) holds its zero value only while unset, so writing that zero (top_p: 0,
// responses_per_prompt: 0, kind: "") is an error; a field whose zero means
// something of its own (temperature: 0, greedy) is a pointer, and keeps it.
func checkExplicit(n *yaml.Node, f reflect.StructField, path string, src *source) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	def, ok := defaultText(f)
	if !ok || f.Type.Kind() == reflect.Pointer || n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return nil
	}
	v := reflect.New(f.Type)
	if err := n.Decode(v.Interface()); err != nil || !isZero(v.Elem()) {
		return nil
	}
	what := "0"
	if f.Type.Kind() == reflect.String {
		what = "empty"
	}
	if n.Line < 0 { // an override
		return fmt.Errorf("%s: must not be %s; without the override the default applies (%s)", src.at(path, n.Line), what, def)
	}
	return fmt.Errorf("%s: must not be %s; leave the key out for the default (%s)", src.at(path, n.Line), what, def)
}

// defaultText is a field's default as the reference shows it: its default
// tag's literal, or its derived tag's description; ok is false for a field
// without a default.
func defaultText(f reflect.StructField) (text string, ok bool) {
	if d, ok := f.Tag.Lookup("default"); ok {
		return d, true
	}
	return f.Tag.Lookup("derived")
}

// isZero reports whether v is its type's zero value, with -0.0 counted as 0.
func isZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	}
	return v.IsZero()
}

// yamlFields maps the YAML keys of struct type t to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		out[yamlName(f)] = f
	}
	return out
}

// yamlName is a field's YAML key.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func sortedKeys(m map[string]reflect.StructField) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		return "a non-negative integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// CheckKeys reports the first key of a YAML document that the Go type t (a
// struct, decoded with yaml tags) does not have, by its path and line, with
// the same checks of values as Parse. Other packages with YAML files of their
// own use it for the same strictness.
func CheckKeys(n *yaml.Node, t reflect.Type) error { return checkKeys(n, t, "", nil) }
