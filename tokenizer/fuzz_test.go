package tokenizer

import (
	"bytes"
	"encoding/json"
	"github.com/hacrl/hacrl/internal/timebox"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hacrl/hacrl/internal/npmtest"
)

// The fuzz targets of the files a model brings: tokenizer.json,
// tokenizer_config.json, its chat template, and the Jinja filters and
// methods the templates call. Their seeds are the real Qwen3 and Llama 3
// files (package npmtest installs them) and the shipped agents' files.

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// cutTokenizer returns a real tokenizer.json cut down to the tokens with ids
// below keep, the merges among them, and its added tokens renumbered from
// keep on; every other section stays as published.
func cutTokenizer(tb testing.TB, data []byte, keep int) []byte {
	tb.Helper()
	var f map[string]json.RawMessage
	var m map[string]json.RawMessage
	var vocab map[string]int
	var merges []json.RawMessage
	var added []map[string]any
	for _, step := range []struct {
		raw func() []byte
		v   any
	}{
		{func() []byte { return data }, &f}, {func() []byte { return f["model"] }, &m},
		{func() []byte { return m["vocab"] }, &vocab}, {func() []byte { return m["merges"] }, &merges},
		{func() []byte { return f["added_tokens"] }, &added},
	} {
		if err := json.Unmarshal(step.raw(), step.v); err != nil {
			tb.Fatal(err)
		}
	}
	small := map[string]int{}
	for tok, id := range vocab {
		if id < keep {
			small[tok] = id
		}
	}
	var kept []json.RawMessage
	for _, raw := range merges {
		var pair []string
		var s string
		if json.Unmarshal(raw, &s) == nil {
			pair = strings.SplitN(s, " ", 2)
		} else if err := json.Unmarshal(raw, &pair); err != nil {
			tb.Fatal(err)
		}
		if len(pair) != 2 {
			continue
		}
		_, a := small[pair[0]]
		_, b := small[pair[1]]
		_, ab := small[pair[0]+pair[1]]
		if a && b && ab {
			kept = append(kept, raw)
		}
	}
	for i := range added {
		added[i]["id"] = keep + i
	}
	set := func(dst map[string]json.RawMessage, key string, v any) {
		raw, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		dst[key] = raw
	}
	set(m, "vocab", small)
	set(m, "merges", kept)
	set(f, "model", m)
	set(f, "added_tokens", added)
	out, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// fuzzTexts are what a parsed tokenizer encodes: plain text, digits,
// Unicode, and the special tokens of ChatML and Llama 3.
var fuzzTexts = []string{"Hello, world! 12+345=357", " ünïcödé 数学 🙂\n\n\t x", "<|im_start|>user\nhi<|im_end|>",
	"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n2*3?<|eot_id|>", ""}

// tokenizerFields are the top-level keys of a tokenizer.json, which every
// refusal names first.
var tokenizerFields = regexp.MustCompile(`^(invalid JSON: |(version|truncation|padding|added_tokens|normalizer|pre_tokenizer|post_processor|decoder|model)[\w.\[\]"]*: \S)`)

// FuzzTokenizerJSON feeds any bytes to the tokenizer.json reader. It either
// refuses them with an error that starts with the field at fault (or says
// the JSON is invalid), or gives a tokenizer that writes itself back to a
// file that reads back to the same tokenizer (the same bytes again, the
// same ids for every text), whose ids are within its vocabulary, and that
// encodes deterministically; all within 10 s. The seeds are the real Qwen3 and Llama 3
// tokenizers cut down to their first 300 and 600 tokens (the whole files
// are checked against tokenizers and transformers in python_test.go) and
// the shipped agents' tokenizers.
func FuzzTokenizerJSON(f *testing.F) {
	dir := npmtest.Dir(f)
	for _, m := range realModels {
		data := readFile(f, filepath.Join(npmtest.Model(dir, m), "tokenizer.json"))
		f.Add(cutTokenizer(f, data, 600), fuzzTexts[2])
		f.Add(cutTokenizer(f, data, 300), fuzzTexts[1])
	}
	for _, a := range []string{"gpt-char", "llama-bpe"} {
		f.Add(readFile(f, filepath.Join("..", "examples", "agents", a, "tokenizer.json")), "3+4=7")
	}
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		timebox.Run(t, 10*time.Second, func() { checkTokenizerJSON(t, data, text) })
	})
}

// checkTokenizerJSON is FuzzTokenizerJSON's check of one input.
func checkTokenizerJSON(t *testing.T, data []byte, text string) {
	tok, err := parse(data)
	if err != nil {
		if !tokenizerFields.MatchString(err.Error()) {
			t.Fatalf("error names no field: %v", err)
		}
		return
	}
	out, err := tok.marshal()
	if err != nil {
		t.Fatalf("a tokenizer read does not write: %v", err)
	}
	back, err := parse(out)
	if err != nil {
		t.Fatalf("a tokenizer written does not read back: %v", err)
	}
	again, err := back.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Fatalf("written, read and written again differs:\n%s\n%s", out, again)
	}
	for _, s := range append(fuzzTexts, text) {
		ids := tok.Encode(s)
		if got := back.Encode(s); !reflect.DeepEqual(ids, got) {
			t.Fatalf("Encode(%q) = %v, read back %v", s, ids, got)
		}
		if got := tok.Encode(s); !reflect.DeepEqual(ids, got) {
			t.Fatalf("Encode(%q) = %v, then %v", s, ids, got)
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("Encode(%q) = %v: id %d outside the vocabulary of %d", s, ids, id, tok.VocabSize())
			}
		}
		if d := tok.Decode(ids); !utf8.ValidString(s) || d != back.Decode(ids) {
			if utf8.ValidString(s) {
				t.Fatalf("Decode(%v) = %q, read back %q", ids, d, back.Decode(ids))
			}
		}
	}
}

// configFields are the keys of tokenizer_config.json that a refusal names.
var configFields = regexp.MustCompile(`^(invalid JSON: |(chat_template|bos_token|eos_token|pad_token|add_bos_token|added_tokens_decoder)[\w.\[\]"]*: \S)`)

// FuzzTokenizerConfig feeds any bytes to the tokenizer_config.json reader.
// It either refuses them naming the field at fault, or reads a config whose
// chat template, when it has one, either fails to compile with an error
// naming the file or renders a conversation the same way twice. The seeds
// are the real Qwen3 and Llama 3 configs.
func FuzzTokenizerConfig(f *testing.F) {
	dir := npmtest.Dir(f)
	for _, m := range realModels {
		f.Add(readFile(f, filepath.Join(npmtest.Model(dir, m), ConfigFile)))
	}
	f.Add([]byte(`{"chat_template": [{"name": "default", "template": "{{ messages[0].content }}"}], "bos_token": {"content": "<s>"}, "add_bos_token": true}`))
	const source = "fuzz/tokenizer_config.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseTokenizerConfig(data)
		if err != nil {
			if !configFields.MatchString(err.Error()) {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		if c.ChatTemplate == "" {
			return
		}
		tpl, err := NewChatTemplate(source, c.ChatTemplate, c.BOS, c.EOS)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: "+source+": chat_template") {
				t.Fatalf("error names no file: %v", err)
			}
			return
		}
		renderTwice(t, tpl, fuzzConversation("What is 2+3?"), true, nil)
	})
}

// fuzzConversation is a system, user and assistant turn, then question.
func fuzzConversation(question string) []Message {
	return []Message{{"system", "Solve it."}, {"user", "1+1?"}, {"assistant", "2"}, {"user", question}}
}

// renderTwice renders msgs twice and fails unless both give the same text
// or both fail with the same error naming the template's source; it returns
// the text.
func renderTwice(t *testing.T, tpl *ChatTemplate, msgs []Message, gen bool, vars map[string]any) (string, error) {
	t.Helper()
	out, err := tpl.Render(msgs, gen, vars)
	out2, err2 := tpl.Render(msgs, gen, vars)
	if out != out2 || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
		t.Fatalf("two renderings differ: %q, %v; then %q, %v", out, err, out2, err2)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "tokenizer: "+tpl.Source()+": ") {
		t.Fatalf("error names no file: %v", err)
	}
	return out, err
}

// FuzzChatTemplate compiles any template text and renders a conversation
// holding the fuzzed content with it: it either fails to compile, naming
// the template's file, or renders the same text twice (or fails the same
// way twice, naming the file). The seeds are the real Qwen3, Llama 3 and
// Llama 3.2 (dated) templates.
func FuzzChatTemplate(f *testing.F) {
	dir := npmtest.Dir(f)
	for _, m := range realModels {
		c, err := ReadTokenizerConfig(filepath.Join(npmtest.Model(dir, m), ConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.ChatTemplate, "What is 2+3?", true)
		f.Add(c.ChatTemplate, " <think>\n\n</think> {{ 1 }}\n", false)
	}
	f.Add(string(readFile(f, filepath.Join("testdata", "llama3-dated.jinja"))), "x", true)
	f.Add(`{% for m in messages %}{{ m.content | trim | tojson(indent=2) }}{% endfor %}`, `"quoted"`, true)
	const source = "fuzz/chat_template.jinja"
	f.Fuzz(func(t *testing.T, text, content string, gen bool) {
		tpl, err := NewChatTemplate(source, text, "<s>", "</s>")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: "+source+": chat_template") {
				t.Fatalf("error names no file: %v", err)
			}
			return
		}
		renderTwice(t, tpl, fuzzConversation(content), gen, map[string]any{"enable_thinking": gen})
	})
}

// FuzzRealChatTemplates renders a conversation of any texts with the real
// Qwen3 and Llama 3 templates: each renders (a real template raises on no
// message of these), the same way twice, and the prompt holds every
// message's text as given, trimmed of surrounding whitespace as Python
// trims it.
func FuzzRealChatTemplates(f *testing.F) {
	dir := npmtest.Dir(f)
	var tpls []*ChatTemplate
	for _, m := range realModels {
		tpl, _, err := LoadChatTemplate(filepath.Join(npmtest.Model(dir, m), ConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		tpls = append(tpls, tpl)
	}
	f.Add("Solve it.", "Natalia sold clips to 48 of her friends in April. How many clips?", "<think>\nx\n</think>\n\n72", true)
	f.Add("", "{{ messages }}", "{% raise_exception('x') %}", false)
	f.Add(" ", "<|im_start|>user\n", "\u00a0<|eot_id|>\n", true)
	f.Fuzz(func(t *testing.T, system, user, assistant string, gen bool) {
		msgs := []Message{{"user", user}, {"assistant", assistant}, {"user", user}}
		if system != "" {
			msgs = append([]Message{{"system", system}}, msgs...)
		}
		for _, tpl := range tpls {
			out, err := renderTwice(t, tpl, msgs, gen, nil)
			if err != nil {
				t.Fatalf("%s: %v", tpl.Source(), err)
			}
			for _, m := range msgs {
				// Qwen3 drops the reasoning of an earlier assistant turn.
				if m.Role == "assistant" && strings.Contains(m.Content, "</think>") {
					continue
				}
				if !strings.Contains(out, strings.Trim(m.Content, pySpace)) { // Llama 3's | trim
					t.Fatalf("%s: the prompt lacks the %s text %q:\n%s", tpl.Source(), m.Role, m.Content, out)
				}
			}
		}
	})
}

// FuzzToJSON renders any JSON value with the tojson filter, compact and
// indented: the text is JSON that reads back to the same value, written as
// Python's json.dumps writes it (", " and ": " separators compact; one item
// a line indented). The seeds are JSON values such as templates pass to
// tojson (tool definitions, messages) and edge cases.
func FuzzToJSON(f *testing.F) {
	for _, s := range []string{`{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}`,
		`[{"role": "user", "content": "Hi <b>&</b> \u2028 ünï"}]`, `1e300`, `-0.0`, `12345678901234567890`, `"\u0000\u001f\"\\"`, `[[], {}, null, true, 1.5]`} {
		f.Add(s, int8(2))
	}
	compile := func(text string) *ChatTemplate {
		tpl, err := NewChatTemplate("tojson", text, "", "")
		if err != nil {
			f.Fatal(err)
		}
		return tpl
	}
	compact := compile(`{{ x | tojson }}`)
	indented := compile(`{{ x | tojson(indent=n) }}`)
	f.Fuzz(func(t *testing.T, js string, indent int8) {
		var v any
		if json.Unmarshal([]byte(js), &v) != nil {
			return
		}
		n := int(indent) % 9
		if n < 0 {
			n = -n
		}
		for _, c := range []struct {
			tpl    *ChatTemplate
			indent int
		}{{compact, -1}, {indented, n}} {
			out, err := c.tpl.Render(nil, false, map[string]any{"x": v, "n": n})
			if err != nil {
				t.Fatalf("tojson(%s): %v", js, err)
			}
			var back any
			if err := json.Unmarshal([]byte(out), &back); err != nil {
				t.Fatalf("tojson(%s) = %s: not JSON: %v", js, out, err)
			}
			if !reflect.DeepEqual(v, back) {
				t.Fatalf("tojson(%s) = %s reads back as %v, want %v", js, out, back, v)
			}
			if c.indent < 0 && strings.Contains(out, "\n") {
				t.Fatalf("tojson(%s) = %q: a newline in compact JSON", js, out)
			}
		}
	})
}

// pySpace are the characters Python's str.isspace accepts, which strip,
// lstrip and rstrip remove by default (Python 3.11's unicodeobject.c
// _Py_ascii_whitespace and the Unicode White_Space property).
const pySpace = "\t\n\v\f\r\x1c\x1d\x1e\x1f \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"

// FuzzStripMethods renders s.strip(), s.lstrip(), s.rstrip() and s | trim,
// with and without characters to strip, as the chat templates call them,
// and compares each with Python's definition written out here.
func FuzzStripMethods(f *testing.F) {
	for _, s := range [][2]string{{"  <think>\nx\n</think>\n\n", ""}, {"\u3000ä\u00a0", "ä"}, {"xxhixx", "x"}, {"\x1c a \u0085", " "}} {
		f.Add(s[0], s[1])
	}
	tpls := map[string]*ChatTemplate{}
	for _, call := range []string{"strip()", "lstrip()", "rstrip()", "strip(c)", "lstrip(c)", "rstrip(c)", "trim", "trim(c)"} {
		text := "{{ s." + call + " }}"
		if strings.HasPrefix(call, "trim") {
			text = "{{ s | " + call + " }}"
		}
		tpl, err := NewChatTemplate(call, text, "", "")
		if err != nil {
			f.Fatal(err)
		}
		tpls[call] = tpl
	}
	f.Fuzz(func(t *testing.T, s, chars string) {
		if !utf8.ValidString(s) || !utf8.ValidString(chars) {
			return
		}
		for call, tpl := range tpls {
			cut := pySpace
			if strings.Contains(call, "(c)") {
				if chars == "" {
					continue // Python's strip("") strips nothing; templates never pass it
				}
				cut = chars
			}
			want := s
			if !strings.HasPrefix(call, "r") { // strip, lstrip, trim
				want = strings.TrimLeft(want, cut)
			}
			if !strings.HasPrefix(call, "l") {
				want = strings.TrimRight(want, cut)
			}
			got, err := tpl.Render(nil, false, map[string]any{"s": s, "c": chars})
			if err != nil {
				t.Fatalf("%q.%s with c=%q: %v", s, call, chars, err)
			}
			if got != want {
				t.Fatalf("%q.%s with c=%q = %q, Python gives %q", s, call, chars, got, want)
			}
		}
	})
}
