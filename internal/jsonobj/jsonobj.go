// Package jsonobj reads one JSON object as its members in order, each kept
// as its original text, and writes such an object back with members
// replaced or added. The commands that annotate JSON lines (hacrl verify
// --jsonl, hacrl score) use it to repeat a line's fields exactly — order,
// number literals and all, which decoding into a map would lose — and
// append their own.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Field is one member of a JSON object: its key and its value as written.
type Field struct {
	Key string
	Raw json.RawMessage
}

// Decode reads data, which must hold exactly one JSON object, into its
// members in order.
func Decode(data []byte) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("expected a JSON object")
	}
	var fields []Field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		key := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("invalid JSON in field %q: %w", key, err)
		}
		fields = append(fields, Field{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	return fields, nil
}

// Get returns the value of the first member named key, or nil.
func Get(fields []Field, key string) json.RawMessage {
	for _, f := range fields {
		if f.Key == key {
			return f.Raw
		}
	}
	return nil
}

// Line writes fields as one JSON object followed by a newline: the members
// whose keys are not among the added ones, as they were, then the added
// members in order (each value already JSON).
func Line(fields []Field, added ...Field) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	write := func(f Field) {
		if n > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(f.Key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(f.Raw)
		n++
	}
	for _, f := range fields {
		if !slices.ContainsFunc(added, func(a Field) bool { return a.Key == f.Key }) {
			write(f)
		}
	}
	for _, f := range added {
		write(f)
	}
	b.WriteString("}\n")
	return b.Bytes()
}
