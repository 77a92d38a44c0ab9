package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkKeys walks a YAML node against the Go type it will be decoded into and
// reports the first key that the type does not have, by its path
// (e.g. "agents[1].sampling.temprature"), with the valid keys listed.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return checkKeys(n.Content[0], t, path)
	}
	if n.Kind == yaml.AliasNode {
		return checkKeys(n.Alias, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s (line %d): expected a mapping of keys, got %s", orRoot(path), n.Line, describe(n))
		}
		fields := yamlFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if seen[k.Value] {
				return fmt.Errorf("%s (line %d): key given twice", p, k.Line)
			}
			seen[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("%s (line %d): unknown key; valid keys here: %s", p, k.Line, strings.Join(sortedKeys(fields), ", "))
			}
			if err := checkKeys(v, ft, p); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s (line %d): expected a list, got %s", orRoot(path), n.Line, describe(n))
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%s (line %d): expected a mapping, got %s", orRoot(path), n.Line, describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	default:
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			return fmt.Errorf("%s (line %d): expected a single value (%s), got %s", orRoot(path), n.Line, t.Kind(), describe(n))
		}
		// Decode the scalar alone so a type error names its path.
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			return fmt.Errorf("%s (line %d): cannot read %q as %s", orRoot(path), n.Line, n.Value, typeName(t))
		}
	}
	return nil
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string {
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
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// CheckKeys reports the first key of a YAML document that the Go type t (a
// struct, decoded with yaml tags) does not have, by its path and line. Other
// packages with YAML files of their own use it for the same strictness.
func CheckKeys(n *yaml.Node, t reflect.Type) error { return checkKeys(n, t, "") }
