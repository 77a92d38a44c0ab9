package tokenizer

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
)

// The real Qwen3 and Llama 3 tokenizers and chat templates checked against
// the Python libraries users load hacrl's files with: tokenizers'
// Tokenizer.from_file and transformers' AutoTokenizer (encoding, decoding)
// and apply_chat_template (templates), through testdata/hf_oracle.py.

// pyOracle is testdata/hf_oracle.py's answer.
type pyOracle struct {
	Encode []struct {
		Tokenizers [][]int  `json:"tokenizers"`
		Auto       [][]int  `json:"auto"`
		Decoded    []string `json:"decoded"`
	} `json:"encode"`
	Apply []struct {
		Texts    []*string `json:"texts"`
		IDs      [][]int   `json:"ids"`
		Errors   []*string `json:"errors"`
		Template string    `json:"template"`
	} `json:"apply"`
}

type pyContext struct {
	Messages            []Message      `json:"messages"`
	AddGenerationPrompt bool           `json:"add_generation_prompt"`
	Vars                map[string]any `json:"vars,omitempty"`
}

type pyApply struct {
	Dir      string      `json:"dir"`
	Contexts []pyContext `json:"contexts"`
}

type pyEncode struct {
	Dir   string   `json:"dir"`
	Texts []string `json:"texts"`
}

// runOracle runs testdata/hf_oracle.py once on all requests.
func runOracle(t *testing.T, encode []pyEncode, apply []pyApply) pyOracle {
	t.Helper()
	var res pyOracle
	pyenv.Run(t, filepath.Join("testdata", "hf_oracle.py"), map[string]any{"encode": encode, "apply": apply}, &res)
	if len(res.Encode) != len(encode) || len(res.Apply) != len(apply) {
		t.Fatalf("hf_oracle.py returned %d/%d results for %d/%d requests", len(res.Encode), len(res.Apply), len(encode), len(apply))
	}
	return res
}

// Every benchmark question, the special-token texts and the multi-turn
// conversations as the real templates render them encode to the ids of
// tokenizers' Tokenizer.from_file and of AutoTokenizer, and decode as
// AutoTokenizer decodes them (skipping special tokens): one Python process
// for all texts of both models.
func TestRealTokenizersAgreeWithPython(t *testing.T) {
	dir := npmtest.Dir(t)
	questions := benchmarkQuestions(t)
	if len(questions) != 7866 {
		t.Errorf("%d benchmark questions, want the 7,866 of the shared data's README", len(questions))
	}
	specials := []string{"<|im_start|>user\nWhat is 12+7?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
		"", " ", "\n\n\n", "  leading and trailing  ", "tab\tand\r\nCRLF", "x<|im_end|>y<|eot_id|>z", "ÿ\u00a0\u200b\ufeff"}
	var reqs []pyEncode
	for _, m := range realModels {
		texts := slices.Concat(questions, specials)
		chat, _, err := LoadChatTemplate(filepath.Join(npmtest.Model(dir, m), ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, conv := range conversations(questions) {
			s, err := chat.Render(conv, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, s)
		}
		reqs = append(reqs, pyEncode{Dir: npmtest.Model(dir, m), Texts: texts})
	}
	res := runOracle(t, reqs, nil)
	for i, m := range realModels {
		tok, err := Load(filepath.Join(reqs[i].Dir, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		py := res.Encode[i]
		bad := 0
		report := func(format string, args ...any) {
			if bad++; bad <= 3 {
				t.Errorf(m+": "+format, args...)
			}
		}
		for j, text := range reqs[i].Texts {
			ids := tok.Encode(text)
			switch {
			case !slices.Equal(ids, py.Tokenizers[j]):
				report("Encode(%.60q)\n     go: %v\n tokenizers: %v", text, ids, py.Tokenizers[j])
			case !slices.Equal(ids, py.Auto[j]):
				report("Encode(%.60q)\n     go: %v\n AutoTokenizer: %v", text, ids, py.Auto[j])
			case tok.Decode(ids) != py.Decoded[j]:
				report("Decode(Encode(%.60q))\n go: %q\n AutoTokenizer: %q", text, tok.Decode(ids), py.Decoded[j])
			case j < len(questions) && tok.Decode(ids) != text:
				report("Decode(Encode(%.60q)) = %.60q: not a round trip", text, tok.Decode(ids))
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d texts differ from the Python libraries", m, bad, len(reqs[i].Texts))
		} else {
			t.Logf("%s: %d texts encode and decode as tokenizers and AutoTokenizer do", m, len(reqs[i].Texts))
		}
	}
}

// templateCase is one rendering: a conversation under a template
// directory with the variables hacrl is given (vars) and those
// apply_chat_template is given (pyVars).
type templateCase struct {
	layout      string
	conv        int
	gen         bool
	vars        map[string]any
	pyVars      map[string]any
	pyTodayDate bool // pyVars lack date_string: transformers writes today's date
}

// chatCases are the renderings the Python checks compare: Qwen3 with
// enable_thinking unset, true and false (as published, from a
// chat_template.jinja, and with both), Llama 3, and the dated Llama 3.2
// style header with a date given, with none (hacrl's fixed date, given to
// transformers as date_string) and with none for either (transformers'
// strftime_now: today), each with the generation prompt on and off.
func chatCases(nconv int) []templateCase {
	var cases []templateCase
	for c := range nconv {
		for _, gen := range []bool{true, false} {
			for _, layout := range []string{npmtest.Qwen3, npmtest.Qwen3Jinja, npmtest.Qwen3Both} {
				for _, vars := range []map[string]any{nil, {"enable_thinking": true}, {"enable_thinking": false}} {
					cases = append(cases, templateCase{layout: layout, conv: c, gen: gen, vars: vars, pyVars: vars})
				}
			}
			cases = append(cases,
				templateCase{layout: npmtest.Llama3, conv: c, gen: gen},
				templateCase{layout: npmtest.Llama3Dated, conv: c, gen: gen, vars: map[string]any{"date_string": "01 Jan 2025"}, pyVars: map[string]any{"date_string": "01 Jan 2025"}},
				templateCase{layout: npmtest.Llama3Dated, conv: c, gen: gen, pyVars: map[string]any{"date_string": "26 Jul 2024"}},
				templateCase{layout: npmtest.Llama3Dated, conv: c, gen: gen, pyTodayDate: true})
		}
	}
	return cases
}

// edgeConversations are where gonja's own methods differ from Python's:
// Unicode whitespace at the edges of messages, which the real templates
// strip (Qwen3's content.strip() and .lstrip('\n') of reasoning, Llama 3's
// | trim) and Python strips all that str.isspace accepts (\x1c–\x1f,
// U+0085, U+00A0, U+3000, …); and an assistant turn with </think> but no
// <think>, which Qwen3's template splits and indexes with [-1] (gonja reads
// the last item of a one-item list as undefined).
var edgeConversations = [][]Message{
	{{"system", "\u3000Solve.\u00a0"}, {"user", "\x1c 2+3? \u2003"}},
	{{"user", "\u00a0\u00a0x"}, {"assistant", "\u3000<think>\n\u2009why\n</think>\n\u00a05\x1f"}, {"user", "\u0085y\u205f"}},
	{{"user", "0"}, {"assistant", "</think>"}, {"user", "0"}},
	{{"user", "2+2?"}, {"assistant", "Add them.\n</think>\n\n4"}, {"user", "And 3+3?"}},
}

// apply_chat_template renders every multi-turn conversation, as text and as
// ids, exactly as hacrl's hf template does, for the real Qwen3 template
// (enable_thinking unset, true, false), Llama 3's, and a dated Llama 3.2
// style header (date_string given, or hacrl's fixed date); with the
// template in tokenizer_config.json or in chat_template.jinja (which wins
// over the config's, as in transformers). Without date_string transformers
// writes today's date (strftime_now) where hacrl writes the template's
// fixed one: a deliberate difference, so that a prompt does not depend on
// the day.
func TestRealChatTemplatesAgreeWithPython(t *testing.T) {
	dir := npmtest.Dir(t)
	dirs := npmtest.TemplateDirs(t, dir)
	convs := append(conversations(benchmarkQuestions(t)), edgeConversations...)
	cases := chatCases(len(convs))
	layouts := slices.Sorted(maps.Keys(dirs))
	var reqs []pyApply
	where := map[string]int{}
	for i, l := range layouts {
		where[l] = i
		reqs = append(reqs, pyApply{Dir: dirs[l]})
	}
	index := make([]int, len(cases)) // the case's context in its layout's request
	for k, c := range cases {
		r := &reqs[where[c.layout]]
		index[k] = len(r.Contexts)
		r.Contexts = append(r.Contexts, pyContext{Messages: convs[c.conv], AddGenerationPrompt: c.gen, Vars: c.pyVars})
	}
	res := runOracle(t, nil, reqs)

	today := time.Now().Format("02 Jan 2006")
	toks := map[string]Tokenizer{}
	bad := 0
	for k, c := range cases {
		tokPath := filepath.Join(dirs[c.layout], "tokenizer.json")
		if toks[c.layout] == nil {
			tok, err := Load(tokPath)
			if err != nil {
				t.Fatal(err)
			}
			toks[c.layout] = tok
		}
		tok := toks[c.layout]
		tmpl := Template{Kind: KindHF, Vars: c.vars}
		if err := tmpl.LoadChat(tokPath, tok); err != nil {
			t.Fatalf("%s: %v", c.layout, err)
		}
		text, err := tmpl.RenderMessages(tok, convs[c.conv], c.gen)
		if err != nil {
			t.Fatalf("%s conversation %d: %v", c.layout, c.conv, err)
		}
		ids, err := tmpl.PromptMessages(tok, convs[c.conv], c.gen)
		if err != nil {
			t.Fatal(err)
		}
		py := res.Apply[where[c.layout]]
		j := index[k]
		if py.Errors[j] != nil {
			t.Fatalf("%s conversation %d: apply_chat_template: %s", c.layout, c.conv, *py.Errors[j])
		}
		want, wantIDs := *py.Texts[j], py.IDs[j]
		if c.pyTodayDate {
			if !strings.Contains(want, "Today Date: "+today+"\n") {
				t.Errorf("%s: transformers without date_string wrote no %q:\n%q", c.layout, today, want)
			}
			// hacrl writes the template's fixed date instead: the same
			// prompt but for the date.
			want = strings.Replace(want, "Today Date: "+today, "Today Date: 26 Jul 2024", 1)
			wantIDs = tok.Encode(want)
		}
		switch {
		case text != want:
			if bad++; bad <= 3 {
				t.Errorf("%s conversation %d (add_generation_prompt %v, vars %v):\n     go: %q\n python: %q", c.layout, c.conv, c.gen, c.vars, text, want)
			}
		case !slices.Equal(ids, wantIDs):
			if bad++; bad <= 3 {
				t.Errorf("%s conversation %d (add_generation_prompt %v, vars %v): ids\n     go: %v\n python: %v", c.layout, c.conv, c.gen, c.vars, ids, wantIDs)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d renderings differ from apply_chat_template", bad, len(cases))
	} else {
		t.Logf("%d renderings of %d layouts equal apply_chat_template's text and ids", len(cases), len(layouts))
	}

	// Where both hold one, chat_template.jinja's template is the one used.
	for _, l := range []string{npmtest.Qwen3Jinja, npmtest.Qwen3Both} {
		chat, cfg, err := LoadChatTemplate(filepath.Join(dirs[l], ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Apply[where[l]].Template; got != cfg.ChatTemplate || chat.Source() != filepath.Join(dirs[l], ChatTemplateFile) {
			t.Errorf("%s: hacrl read the template from %s; transformers' chat_template is %.60q, hacrl's %.60q", l, chat.Source(), got, cfg.ChatTemplate)
		}
	}
}
