package config

import (
	"bytes"
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// The schema's defaults live in the struct tags of the config types, one
// source for the code that applies them and for the reference
// (docs/config.md):
//
//	default:"8"        the literal default of a field, applied by fillDefaults
//	derived:"heads"    a default computed from other settings (by applyDefaults,
//	                   or by package train for what lives in other packages);
//	                   the text says how, for the reference
//
// An unset field is a nil pointer or, for the others, the zero value. A
// non-pointer field with a default therefore cannot be given its zero value
// explicitly (see checkExplicit); a field whose zero value is a meaning of
// its own (temperature 0: greedy; max_grad_norm 0: no clipping) is a pointer.

// FillDefaults sets every unset field of *v, a config struct (such as an
// Agent or Optimizer built in code rather than parsed), that has a default
// tag to the tag's value, recursively: what Parse does for the keys a file
// leaves out. Pointers inside *v that are already set are filled in place.
func FillDefaults[T any](v *T) { fillDefaults(reflect.ValueOf(v).Elem()) }

// fillDefaults sets every unset field of v (a struct, or what holds structs)
// that has a default tag to the tag's value, recursively.
func fillDefaults(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fillDefaults(v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			fillDefaults(v.Index(i))
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue
			}
			if _, ok := f.Tag.Lookup("default"); ok {
				switch {
				case f.Type.Kind() == reflect.Pointer && fv.IsNil():
					fv.Set(parseDefault(f, f.Type.Elem()))
				case f.Type.Kind() != reflect.Pointer && isZero(fv):
					fv.Set(parseDefault(f, f.Type).Elem())
				}
			}
			fillDefaults(fv)
		}
	}
}

// parseDefault returns a pointer to a new value of type t holding f's
// default tag, read as YAML. A tag that does not parse is a programming
// error, which every test that parses a config finds.
func parseDefault(f reflect.StructField, t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if err := yaml.Unmarshal([]byte(f.Tag.Get("default")), p.Interface()); err != nil {
		panic(fmt.Sprintf("config: field %s: default tag %q: %v", f.Name, f.Tag.Get("default"), err))
	}
	return p
}

// Marshal writes a config (a *Config or *SFT) as YAML that Parse (or
// LoadSFT) reads back to the same value: every key that is set, zero values
// that mean something of their own included (top_k: 0, at_start: false),
// without the keys left unset (nil pointers, empty strings and lists, and
// the zero of a field with a default or of one task's option).
func Marshal(v any) ([]byte, error) {
	n, ok := encodeValue(reflect.ValueOf(v), reflect.StructField{})
	if !ok {
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// encodeValue is the node of v, the value of field f; ok is false when v is
// unset and its key is left out.
func encodeValue(v reflect.Value, f reflect.StructField) (n *yaml.Node, ok bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil, false
		}
		n, ok := encodeValue(v.Elem(), reflect.StructField{})
		if !ok && v.Elem().Kind() == reflect.Struct {
			// A section given with nothing set in it (task: {}) stays given.
			return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}, true
		}
		return n, ok
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			ft := t.Field(i)
			if !ft.IsExported() || yamlName(ft) == "-" {
				continue
			}
			c, ok := encodeValue(v.Field(i), ft)
			if !ok {
				continue
			}
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: yamlName(ft)}, c)
		}
		return m, len(m.Content) > 0
	case reflect.Map:
		if v.Len() == 0 {
			return nil, false
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return nil, false
		}
		s := &yaml.Node{Kind: yaml.SequenceNode}
		for i := 0; i < v.Len(); i++ {
			c, ok := encodeValue(v.Index(i), reflect.StructField{})
			if !ok {
				c = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			}
			s.Content = append(s.Content, c)
		}
		return s, true
	case reflect.String:
		if v.Len() == 0 {
			return nil, false
		}
	default:
		_, hasDefault := defaultText(f)
		_, oneTask := f.Tag.Lookup("task") // another task's option, or a default
		if (hasDefault || oneTask) && isZero(v) {
			return nil, false
		}
	}
	n = &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		panic(fmt.Sprintf("config: encoding %v: %v", v, err))
	}
	return n, true
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	return cloneValue(reflect.ValueOf(c)).Interface().(*Config)
}

func cloneValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(cloneValue(v.Elem()))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			s.Index(i).Set(cloneValue(v.Index(i)))
		}
		return s
	case reflect.Map:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			m.SetMapIndex(it.Key(), cloneValue(it.Value()))
		}
		return m
	case reflect.Struct:
		s := reflect.New(v.Type()).Elem()
		s.Set(v) // unexported fields, if any, are copied as they are
		for i := 0; i < v.NumField(); i++ {
			if s.Field(i).CanSet() {
				s.Field(i).Set(cloneValue(v.Field(i)))
			}
		}
		return s
	}
	return v
}
