package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadGenerationConfig(t *testing.T) {
	ip := func(v int) *int { return &v }
	tests := []struct {
		name string
		text string // "" for no file
		eos  []int
		bos  *int
		pad  *int
		err  []string // substrings of the error, beside the file name
	}{
		{"no file", "", nil, nil, nil, nil},
		// Qwen3-0.6B's file.
		{"qwen3", `{"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
			"temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}`,
			[]int{151645, 151643}, ip(151643), ip(151643), nil},
		// Llama-3.2-1B-Instruct's file.
		{"llama 3.2 instruct", `{"bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128008, 128009],
			"temperature": 0.6, "top_p": 0.9, "transformers_version": "4.45.0.dev0"}`,
			[]int{128001, 128008, 128009}, ip(128000), nil, nil},
		{"one eos", `{"eos_token_id": 2, "pad_token_id": null}`, []int{2}, nil, nil, nil},
		{"empty object", `{}`, nil, nil, nil, nil},
		{"eos a string", `{"eos_token_id": "</s>"}`, nil, nil, nil, []string{`"eos_token_id"`}},
		{"eos list with a string", `{"eos_token_id": [1, "x"]}`, nil, nil, nil, []string{`"eos_token_id"`}},
		{"eos fractional", `{"eos_token_id": 2.5}`, nil, nil, nil, []string{`"eos_token_id"`}},
		{"negative eos", `{"eos_token_id": [3, -1]}`, nil, nil, nil, []string{`"eos_token_id"`, "-1"}},
		{"bos a list", `{"bos_token_id": [1]}`, nil, nil, nil, []string{`"bos_token_id"`}},
		{"temperature a string", `{"temperature": "hot"}`, nil, nil, nil, []string{`"temperature"`}},
		{"do_sample a number", `{"do_sample": 1}`, nil, nil, nil, []string{`"do_sample"`}},
		{"not an object", `[1, 2]`, nil, nil, nil, []string{"JSON object"}},
		{"truncated", `{"eos_token_id": [1,`, nil, nil, nil, []string{"JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, GenerationConfigFile)
			if tc.text != "" {
				if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g, err := LoadGenerationConfig(dir)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("no error, want one mentioning %v", tc.err)
				}
				for _, w := range append(tc.err, path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.EOSTokenIDs, tc.eos) || !sameIntPtr(g.BOSTokenID, tc.bos) || !sameIntPtr(g.PadTokenID, tc.pad) {
				t.Errorf("got eos %v bos %v pad %v, want %v %v %v", g.EOSTokenIDs, g.BOSTokenID, g.PadTokenID, tc.eos, tc.bos, tc.pad)
			}
			if tc.text == "" {
				return
			}
			// Written back, the file keeps every field and value.
			out := filepath.Join(t.TempDir(), GenerationConfigFile)
			if err := g.WriteJSON(out); err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			data, _ := os.ReadFile(out)
			if json.Unmarshal([]byte(tc.text), &a) != nil || json.Unmarshal(data, &b) != nil || !jsonEqual(a, b) {
				t.Errorf("written back as %s, want the fields of %s", data, tc.text)
			}
		})
	}
}

func sameIntPtr(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestGenerationConfigTravelsWithModel loads a checkpoint with a
// generation_config.json and saves it: the file comes along, also through
// Clone; a checkpoint without one saves none; a malformed one fails Load.
func TestGenerationConfigTravelsWithModel(t *testing.T) {
	m := newTiny(t, "qwen2-tied", 1)
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, GenerationConfigFile)); !os.IsNotExist(err) {
		t.Fatalf("a model without a generation config saved one (%v)", err)
	}
	text := `{"eos_token_id": [2, 3], "bos_token_id": 1, "transformers_version": "4.51.0"}`
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := loaded.GenerationConfig()
	if !ok || !slices.Equal(g.EOSTokenIDs, []int{2, 3}) {
		t.Fatalf("GenerationConfig = %+v, %v; want eos [2 3]", g, ok)
	}
	c, err := loaded.Clone()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := c.Save(out); err != nil {
		t.Fatal(err)
	}
	g2, err := LoadGenerationConfig(out)
	if err != nil || !slices.Equal(g2.EOSTokenIDs, []int{2, 3}) || g2.BOSTokenID == nil || *g2.BOSTokenID != 1 {
		t.Fatalf("saved generation config = %+v (%v), want eos [2 3], bos 1", g2, err)
	}
	data, _ := os.ReadFile(filepath.Join(out, GenerationConfigFile))
	if !strings.Contains(string(data), `"transformers_version": "4.51.0"`) {
		t.Errorf("saved generation config %s lost transformers_version", data)
	}
	// A model without one saved over that directory leaves none behind.
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, GenerationConfigFile)); !os.IsNotExist(err) {
		t.Errorf("a stale generation config stayed (%v)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(`{"eos_token_id": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(testBackend(t), dir); err == nil || !strings.Contains(err.Error(), GenerationConfigFile) || !strings.Contains(err.Error(), "eos_token_id") {
		t.Errorf("Load with a malformed generation config: %v, want an error naming the file and field", err)
	}
}
