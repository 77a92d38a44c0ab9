package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hacrl/hacrl/internal/npmtest"
)

// The independent-implementation check: tokenizer.json files written here
// must encode and decode the same in tokenizers.js (@huggingface/tokenizers),
// installed by package npmtest from testdata/npm/package-lock.json.

func npmDir(t *testing.T) string {
	t.Helper()
	return npmtest.Dir(t)
}

type npmCase struct {
	Tokenizer string   `json:"tokenizer"`
	Texts     []string `json:"texts"`
	tok       Tokenizer
	name      string
}

// runTokenizersJS encodes and decodes every case's texts with tokenizers.js.
func runTokenizersJS(t *testing.T, dir string, cases []npmCase) (ids [][][]int, decoded [][]string) {
	t.Helper()
	var res struct {
		Results []struct {
			IDs     [][]int  `json:"ids"`
			Decoded []string `json:"decoded"`
		} `json:"results"`
	}
	npmtest.Run(t, dir, "check.js", map[string]any{"cases": cases}, &res)
	if len(res.Results) != len(cases) {
		t.Fatalf("node check.js returned %d results for %d cases", len(res.Results), len(cases))
	}
	for _, r := range res.Results {
		ids, decoded = append(ids, r.IDs), append(decoded, r.Decoded)
	}
	return ids, decoded
}

// withPreTokenizer rewrites a saved byte-level tokenizer to pre-tokenize like
// Llama 3 or Qwen2: a Split with pattern, then ByteLevel without its regex.
func withPreTokenizer(t *testing.T, src, dst, pattern string, nfc bool) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}}
	if nfc {
		f["normalizer"] = map[string]any{"type": "NFC"}
	}
	if data, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTokenizersJSAgrees(t *testing.T) {
	dir := npmDir(t)
	tmp := t.TempDir()
	save := func(name string, tok Tokenizer) string {
		path := filepath.Join(tmp, name+".json")
		if err := tok.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	load := func(path string) Tokenizer {
		tok, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	texts := append([]string(nil), roundTripTexts[1:]...) // tokenizers.js cannot decode an empty id list
	texts = append(texts,
		"<|im_start|>user\nWhat is 12+7?<|im_end|>\n<|im_start|>assistant\n",
		"a<|endoftext|>b<|endoftext|><|endoftext|>",
		"  two  spaces\n\n\nthree newlines \t tab\u00a0nbsp\u3000ideographic",
		"'s 'S 'll 'LL it'S you'RE \"quoted\" (paren)\n",
		"cafe\u0301 vs café",        // NFC matters for the Qwen2 form
		"1234567 12 1 123456789012", // digit grouping
		"x\r\ny\r\n\r\n  z  \n",     // CR LF runs
		"Ünïcödé ΑΒΓ абв עברית العربية हिन्दी ไทย 한국어", // many scripts
		"\U0001F600\U0001F44D\U0001F3FD \u200d zero-width\u200bjoiner",
	)
	corpus := benchmarkCorpus(t)
	for i := 0; i < len(corpus); i += len(corpus) / 150 {
		texts = append(texts, corpus[i])
	}

	char, err := NewChar("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789+-=?.,\n\té日😀", []string{"<bos>", "<eos>", "<pad>"})
	if err != nil {
		t.Fatal(err)
	}
	bpePath := save("bpe", trainedBPE(t))
	llamaPath := filepath.Join(tmp, "llama3.json")
	qwenPath := filepath.Join(tmp, "qwen2.json")
	withPreTokenizer(t, bpePath, llamaPath, Llama3Pattern, false)
	withPreTokenizer(t, bpePath, qwenPath, Qwen2Pattern, true)
	gpt2Path := writeFile(t, "gpt2.json", gpt2Style)
	charPath := save("char", char)

	cases := []npmCase{
		{name: "char", Tokenizer: charPath, tok: load(charPath), Texts: append(texts, "<bos>12+3=15<eos><pad>", "unknown: ÄÖÜ ß")},
		{name: "trained byte-level BPE", Tokenizer: bpePath, tok: load(bpePath), Texts: texts},
		{name: "Llama 3 pre-tokenizer", Tokenizer: llamaPath, tok: load(llamaPath), Texts: texts},
		{name: "Qwen2 pre-tokenizer + NFC", Tokenizer: qwenPath, tok: load(qwenPath), Texts: texts},
		{name: "hand-written GPT-2", Tokenizer: gpt2Path, tok: load(gpt2Path), Texts: []string{"hello world, héllo!<|endoftext|>", "hello"}},
	}
	jsIDs, jsDecoded := runTokenizersJS(t, dir, cases)
	for c, tc := range cases {
		mismatches := 0
		for i, text := range tc.Texts {
			ids := tc.tok.Encode(text)
			if !slices.Equal(ids, jsIDs[c][i]) {
				if mismatches++; mismatches <= 3 {
					t.Errorf("%s: Encode(%q)\n  go: %v\n  js: %v", tc.name, text, ids, jsIDs[c][i])
				}
				continue
			}
			if got := tc.tok.Decode(ids); got != jsDecoded[c][i] {
				if mismatches++; mismatches <= 3 {
					t.Errorf("%s: Decode(Encode(%q))\n  go: %q\n  js: %q", tc.name, text, got, jsDecoded[c][i])
				}
			}
		}
		if mismatches > 0 {
			t.Errorf("%s: %d of %d texts differ from tokenizers.js", tc.name, mismatches, len(tc.Texts))
		} else {
			t.Logf("%s: %d texts agree with tokenizers.js", tc.name, len(tc.Texts))
		}
	}
}
