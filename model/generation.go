package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// GenerationConfigFile is a checkpoint's generation defaults, as
// transformers' GenerationConfig writes them.
const GenerationConfigFile = "generation_config.json"

// GenerationConfig holds the fields of a checkpoint's generation_config.json
// that hacrl reads. The token ids tell where generation stops (EOSTokenIDs:
// Llama 3 Instruct and Qwen3 list several); the sampling fields are the
// publisher's suggestion, informational only (hacrl samples as its config
// says). A nil pointer is a field absent or null in the file. The zero value
// means "no file".
type GenerationConfig struct {
	BOSTokenID  *int     // bos_token_id
	EOSTokenIDs []int    // eos_token_id: one id or a list, always a list here
	PadTokenID  *int     // pad_token_id
	DoSample    *bool    // do_sample
	Temperature *float64 // temperature
	TopP        *float64 // top_p
	TopK        *int     // top_k

	// fields is every field of the file as read, so that writing it back
	// keeps those hacrl does not interpret (transformers_version, …).
	fields map[string]json.RawMessage
}

// LoadGenerationConfig reads dir/generation_config.json. A missing file
// gives the zero value and a nil error; a malformed one an error naming the
// file and the field.
func LoadGenerationConfig(dir string) (GenerationConfig, error) {
	g, err := readGenerationConfig(dir)
	if err != nil || g == nil {
		return GenerationConfig{}, err
	}
	return *g, nil
}

// readGenerationConfig is LoadGenerationConfig with nil for a missing file.
func readGenerationConfig(dir string) (*GenerationConfig, error) {
	path := filepath.Join(dir, GenerationConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: read generation config: %w", err)
	}
	g, err := parseGenerationConfig(data)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return g, nil
}

func parseGenerationConfig(data []byte) (*GenerationConfig, error) {
	g := &GenerationConfig{}
	if err := json.Unmarshal(data, &g.fields); err != nil || g.fields == nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	// field decodes the named field into dst unless it is absent or null.
	field := func(name string, dst any, want string) error {
		raw, ok := g.fields[name]
		if !ok || string(raw) == "null" {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("field %q: %s, want %s", name, raw, want)
		}
		return nil
	}
	errs := []error{
		field("bos_token_id", &g.BOSTokenID, "a token id"),
		field("pad_token_id", &g.PadTokenID, "a token id"),
		field("do_sample", &g.DoSample, "true or false"),
		field("temperature", &g.Temperature, "a number"),
		field("top_p", &g.TopP, "a number"),
		field("top_k", &g.TopK, "an integer"),
	}
	var one int
	if raw, ok := g.fields["eos_token_id"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &one) == nil {
			g.EOSTokenIDs = []int{one}
		} else {
			errs = append(errs, field("eos_token_id", &g.EOSTokenIDs, "a token id or a list of token ids"))
		}
	}
	for _, id := range []struct {
		name string
		v    *int
	}{{"bos_token_id", g.BOSTokenID}, {"pad_token_id", g.PadTokenID}} {
		if id.v != nil && *id.v < 0 {
			errs = append(errs, fmt.Errorf("field %q: %d, want a token id ≥ 0", id.name, *id.v))
		}
	}
	for _, id := range g.EOSTokenIDs {
		if id < 0 {
			errs = append(errs, fmt.Errorf("field \"eos_token_id\": %d, want token ids ≥ 0", id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// WriteJSON writes g as generation_config.json, atomically: the fields read
// from the file it came from, with the ones GenerationConfig holds set to
// its values (a single end token as a number, several as a list).
func (g GenerationConfig) WriteJSON(path string) error {
	out := make(map[string]any, len(g.fields)+7)
	for k, v := range g.fields {
		out[k] = v
	}
	set := func(name string, present bool, v any) {
		if present {
			out[name] = v
		} else if string(g.fields[name]) != "null" {
			delete(out, name) // an explicit null stays
		}
	}
	set("bos_token_id", g.BOSTokenID != nil, g.BOSTokenID)
	set("pad_token_id", g.PadTokenID != nil, g.PadTokenID)
	set("do_sample", g.DoSample != nil, g.DoSample)
	set("temperature", g.Temperature != nil, g.Temperature)
	set("top_p", g.TopP != nil, g.TopP)
	set("top_k", g.TopK != nil, g.TopK)
	switch len(g.EOSTokenIDs) {
	case 0:
		delete(out, "eos_token_id")
	case 1:
		out["eos_token_id"] = g.EOSTokenIDs[0]
	default:
		out["eos_token_id"] = g.EOSTokenIDs
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("model: encode generation config: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n')); err != nil {
		return fmt.Errorf("model: write generation config: %w", err)
	}
	return nil
}

// GenerationConfig returns the generation_config.json the model was loaded
// with, and whether there was one.
func (m *Model) GenerationConfig() (GenerationConfig, bool) {
	if m.gen == nil {
		return GenerationConfig{}, false
	}
	return *m.gen, true
}

// SetGenerationConfig sets the generation config that Save writes as
// generation_config.json.
func (m *Model) SetGenerationConfig(g GenerationConfig) { m.gen = &g }
