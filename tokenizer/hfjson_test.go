package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gpt2Style is a GPT-2-format tokenizer.json written by hand: ByteLevel
// pre-tokenizer and decoder, merges as "a b" strings, empty subword affixes,
// and an added special token outside model.vocab.
const gpt2Style = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [
    {"id": 20, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null,
    "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, ",": 8, "he": 9, "ll": 10,
              "hell": 11, "hello": 12, "Ġw": 13, "or": 14, "Ġwor": 15, "Ã": 16, "©": 17, "Ã©": 18, "!": 19},
    "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ã ©"]
  }
}`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadGPT2Style(t *testing.T) {
	tok, err := Load(writeFile(t, "tokenizer.json", gpt2Style))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.(*BPE); !ok {
		t.Fatalf("Load returned %T, want *BPE", tok)
	}
	// hello → h e l l o → he l l o → he ll o → hell o → hello
	// " world" → Ġ w o r l d → Ġw o r l d → Ġw or l d → Ġwor l d
	// " héllo" → Ġ h Ã © l l o: "l l" (rank 1) before "Ã ©" (rank 7)
	ids := tok.Encode("hello world, héllo!<|endoftext|>")
	want := []int{12, 15, 2, 7, 8, 4, 0, 18, 10, 3, 19, 20}
	if !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := tok.Decode(ids); got != "hello world, héllo!" {
		t.Errorf("Decode = %q", got)
	}
	if got := tok.Decode([]int{16}); got != "\uFFFD" {
		t.Errorf("Decode(lone lead byte) = %q, want U+FFFD", got)
	}
	if tok.VocabSize() != 21 {
		t.Errorf("VocabSize = %d, want 21", tok.VocabSize())
	}
	if got := tok.Special(); got != (Specials{BOS: -1, EOS: 20, PAD: -1, UNK: -1}) {
		t.Errorf("Special = %+v", got)
	}
	// Characters outside a vocabulary without unk_token are dropped, as HF does.
	if got := tok.Encode("hxllo"); !slices.Equal(got, []int{0, 10, 3}) {
		t.Errorf("Encode(hxllo) = %v, want [0 10 3]", got)
	}
}

// qwen2Style returns a Qwen2-format tokenizer.json: NFC normalizer, a Split
// pre-tokenizer with the Qwen2 regex followed by ByteLevel without regex,
// merges as pairs, ignore_merges, and ChatML special tokens after the vocab.
func qwen2Style(t *testing.T, pattern string) string {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"1", "2"}, {"Ġ", "Ġ"}}
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
	}
	vocab["Ċ"+"Ċ"] = len(vocab) // reachable only through ignore_merges
	f := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []map[string]any{
			{"id": len(vocab), "content": "<|endoftext|>", "special": true, "normalized": false},
			{"id": len(vocab) + 1, "content": "<|im_start|>", "special": true, "normalized": false},
			{"id": len(vocab) + 2, "content": "<|im_end|>", "special": true, "normalized": false},
		},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": true, "vocab": vocab, "merges": merges,
		},
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestLoadQwen2Style(t *testing.T) {
	tok, err := Load(writeFile(t, "tokenizer.json", qwen2Style(t, Qwen2Pattern)))
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int {
		i, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("TokenID(%q) missing", s)
		}
		return i
	}
	// "e\u0301" is NFC-normalized to "é" (bytes C3 A9); "123" is split into
	// single digits, so "1 2" never merges; "\n\n" is one pre-token that
	// ignore_merges maps straight to its vocabulary entry.
	text := "<|im_start|>the the the\u0301 123\n\n<|im_end|>"
	want := []int{id(IMStart), id("t"), id("he"), id("Ġthe"), id("Ġt"), id("h"), id("Ã"), id("©"),
		id("Ġ"), id("1"), id("2"), id("3"), id("ĊĊ"), id(IMEnd)}
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, want)
	}
	if got := tok.Decode(tok.Encode(text)); got != "the the thé 123\n\n" {
		t.Errorf("Decode = %q", got)
	}
	if got := tok.Special(); got.EOS != id("<|endoftext|>") || got.BOS != -1 {
		t.Errorf("Special = %+v", got)
	}
	// Llama 3 groups digits by three.
	llama, err := Load(writeFile(t, "tokenizer.json", qwen2Style(t, Llama3Pattern)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := llama.Encode("1212"), []int{id("12"), id("1"), id("2")}; !slices.Equal(got, want) {
		t.Errorf("Llama 3 Encode(1212) = %v, want %v", got, want)
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	var base map[string]any
	if err := json.Unmarshal([]byte(gpt2Style), &base); err != nil {
		t.Fatal(err)
	}
	model := func(f map[string]any) map[string]any { return f["model"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		mutate func(f map[string]any)
		want   string
	}{
		{"model type", func(f map[string]any) { model(f)["type"] = "WordPiece" }, `model.type: "WordPiece"`},
		{"no vocab", func(f map[string]any) { delete(model(f), "vocab") }, "model.vocab: missing"},
		{"vocab type", func(f map[string]any) { model(f)["vocab"] = []int{1} }, "model.vocab"},
		{"vocab id type", func(f map[string]any) { model(f)["vocab"].(map[string]any)["h"] = "zero" }, "model.vocab"},
		{"shared id", func(f map[string]any) { model(f)["vocab"].(map[string]any)["x"] = 3 }, `model.vocab: "o" and "x" share id 3`},
		{"merge unknown", func(f map[string]any) { model(f)["merges"] = []any{"h q"} }, `model.merges[0]: "q" is not in model.vocab`},
		{"merge result", func(f map[string]any) { model(f)["merges"] = []any{"h e", "o r", "h o"} }, `model.merges[2]: merged token "ho"`},
		{"merge shape", func(f map[string]any) { model(f)["merges"] = []any{"h e l"} }, "model.merges[0]: want two tokens"},
		{"merge type", func(f map[string]any) { model(f)["merges"] = []any{7} }, "model.merges[0]: want"},
		{"unk token", func(f map[string]any) { model(f)["unk_token"] = "<unk>" }, `model.unk_token: "<unk>" is not in model.vocab`},
		{"byte fallback", func(f map[string]any) { model(f)["byte_fallback"] = true }, "model.byte_fallback"},
		{"suffix", func(f map[string]any) { model(f)["end_of_word_suffix"] = "</w>" }, "model.end_of_word_suffix"},
		{"dropout", func(f map[string]any) { model(f)["dropout"] = 0.1 }, "model.dropout"},
		{"added content", func(f map[string]any) {
			f["added_tokens"] = []any{map[string]any{"id": 20, "content": "", "special": true}}
		}, "added_tokens[0].content: empty"},
		{"added id clash", func(f map[string]any) {
			f["added_tokens"] = []any{map[string]any{"id": 3, "content": "<x>", "special": true}}
		}, `added_tokens[0].id: 3 is "o" in model.vocab`},
		{"added id type", func(f map[string]any) {
			f["added_tokens"] = []any{map[string]any{"id": "x", "content": "<x>"}}
		}, "added_tokens.id"},
		{"normalizer", func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer.type: "Lowercase"`},
		{"pre-tokenizer", func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, `pre_tokenizer.type: "Whitespace"`},
		{"split regex", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+`}, "behavior": "Isolated"},
			}}
		}, `pre_tokenizer.pretokenizers[0].pattern.Regex: "\\w+" is not supported`},
		{"split behavior", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": GPT2Pattern}, "behavior": "Removed"}
		}, "pre_tokenizer.behavior"},
		{"decoder", func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder.type: "WordPiece"`},
	} {
		data, _ := json.Marshal(base)
		var f map[string]any
		json.Unmarshal(data, &f)
		tc.mutate(f)
		data, _ = json.Marshal(f)
		path := writeFile(t, "tokenizer.json", string(data))
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want the file and %q", tc.name, err, tc.want)
		}
	}
	for name, content := range map[string]string{"truncated": gpt2Style[:200], "not json": "vocab: {}"} {
		if _, err := Load(writeFile(t, "tokenizer.json", content)); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestLoadTokenizerConfig(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   Specials
		err    string
	}{
		{`{"eos_token": "!", "bos_token": {"content": "<|endoftext|>", "lstrip": false}, "pad_token": null}`,
			Specials{BOS: 20, EOS: 19, PAD: -1, UNK: -1}, ""},
		{`{"model_max_length": 1024}`, Specials{BOS: -1, EOS: 20, PAD: -1, UNK: -1}, ""},
		{`{"eos_token": "<|im_end|>"}`, Specials{}, `eos_token: "<|im_end|>" is not a token`},
		{`{"pad_token": 7}`, Specials{}, "pad_token: want a token string"},
		{`{"pad_token": `, Specials{}, "invalid JSON"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "tokenizer.json")
		os.WriteFile(path, []byte(gpt2Style), 0o644)
		os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.config), 0o644)
		tok, err := Load(path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "tokenizer_config.json") {
				t.Errorf("config %s: err = %v, want %q", tc.config, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("config %s: %v", tc.config, err)
			continue
		}
		if got := tok.Special(); got != tc.want {
			t.Errorf("config %s: Special = %+v, want %+v", tc.config, got, tc.want)
		}
	}
}
