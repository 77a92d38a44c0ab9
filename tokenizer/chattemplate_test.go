package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ConfigFile)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadTokenizerConfig(t *testing.T) {
	path := writeConfig(t, `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
		"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "pad_token": null, "add_bos_token": true,
		"added_tokens_decoder": {"0": {"content": "<s>", "special": true}, "2": {"content": "</s>"}}}`)
	c, err := ReadTokenizerConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ChatTemplate != "D" || c.BOS != "<s>" || c.EOS != "</s>" || c.PAD != "" || c.AddBOS == nil || !*c.AddBOS ||
		len(c.AddedTokens) != 2 || c.AddedTokens[2] != "</s>" || c.Path != path {
		t.Errorf("ReadTokenizerConfig = %+v", c)
	}
}

func TestTokenizerConfigErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"chat_template": [{"name": "tool_use", "template": "T"}]}`, `chat_template: no template named "default" among "tool_use"`},
		{`{"chat_template": 3}`, "chat_template: want a string or a list"},
		{`{"chat_template": [{"name": "default"}]}`, "chat_template[0]: no template"},
		{`{"eos_token": 7}`, "eos_token: want a token string"},
		{`{"add_bos_token": "yes"}`, "add_bos_token: want true or false"},
		{`{"added_tokens_decoder": {"x": {"content": "a"}}}`, `added_tokens_decoder["x"]`},
		{`{"chat_template": "{% if %}"}`, "chat_template does not parse"},
		{`{}`, "no chat_template"},
		{`{"chat_template": "x"`, "unexpected end"},
	} {
		path := writeConfig(t, tc.body)
		_, _, err := LoadChatTemplate(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", tc.body, err, path, tc.want)
		}
	}
}

func TestChatTemplateRaises(t *testing.T) {
	// Like many published templates: only alternating user/assistant roles.
	path := writeConfig(t, `{"chat_template": "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}[{{ m.role }}] {{ m.content }}\n{% endfor %}", "eos_token": "</s>"}`)
	chat, _, err := LoadChatTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := chat.Render([]Message{{"user", "hi"}}, true, nil)
	if err != nil || out != "[user] hi\n" {
		t.Fatalf("Render = %q, %v", out, err)
	}
	_, err = chat.Render([]Message{{"system", "s"}, {"user", "hi"}}, true, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "raised an exception: System role not supported") {
		t.Errorf("Render with a system message: %v, want the raised message naming %s", err, path)
	}
	// The agent's template checks its prompt when it is loaded.
	tokPath := filepath.Join(filepath.Dir(path), "tokenizer.json")
	tmpl := Template{Kind: KindHF, System: "Be brief."}
	if err := tmpl.LoadChat(tokPath, trainedBPE(t)); err == nil || !strings.Contains(err.Error(), "System role not supported") {
		t.Errorf("LoadChat with a system text: %v, want the raised message", err)
	}
	tmpl = Template{Kind: KindHF}
	if err := tmpl.LoadChat(tokPath, trainedBPE(t)); err != nil {
		t.Errorf("LoadChat without a system text: %v", err)
	}
	if _, err := chat.Render([]Message{{"user", "hi"}}, true, map[string]any{"messages": 1}); err == nil || !strings.Contains(err.Error(), `"messages"`) {
		t.Errorf("Render with vars.messages: %v, want an error naming it", err)
	}
}

func TestTemplateValidateHF(t *testing.T) {
	for _, tc := range []struct {
		tmpl Template
		want string
	}{
		{Template{Kind: KindHF, Vars: map[string]any{"enable_thinking": false}}, ""},
		{Template{Kind: KindChat, Vars: map[string]any{"enable_thinking": false}}, "vars apply to kind"},
		{Template{Kind: KindHF, Vars: map[string]any{"add_generation_prompt": false}}, `"add_generation_prompt" is set by the renderer`},
		{Template{Kind: "jinja"}, `want "plain", "chat" or "hf"`},
	} {
		err := tc.tmpl.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate = %v, want %q", tc.tmpl, err, tc.want)
		}
	}
	// Without LoadChat an hf template reports what is missing.
	if _, err := (Template{Kind: KindHF}).PromptErr(trainedBPE(t), "q"); err == nil || !strings.Contains(err.Error(), "LoadChat") {
		t.Errorf("PromptErr without LoadChat: %v", err)
	}
}

// Where Python's Jinja (transformers) and @huggingface/jinja differ, the
// renderer follows Python.
func TestPythonSemantics(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{`{{ 'a. .'.rstrip('. ') }}|{{ '..b'.lstrip('.') }}|{{ ' c '.strip() }}|{{ ' d \n'.rstrip() }}|{{ '\t e '.lstrip() }}`, "a|b|c| d|e "},
		{`{{ 'x \n'.rstrip('\n') }}|{{ '\n\n y'.lstrip('\n') }}|{{ '\n z \n'.strip('\n') }}|`, "x | y| z |"}, // Qwen3's reasoning_content
		{`{{ messages[0].content.endswith('?') }}`, "True"},
		{`{{ 'é😀'|length }}`, "2"},
		{`{{ {'b': 1, 'a': [1.0, 'x<é>', none, false]} | tojson }}`, `{"b": 1, "a": [1.0, "x<é>", null, false]}`}, // insertion order, as in Python
		{`{{ messages | tojson(indent=2) }}`, "[\n  {\n    \"content\": \"hi?\",\n    \"role\": \"user\"\n  }\n]"},
		{`{{ 'a\nb"' | tojson }}`, `"a\nb\""`},
	} {
		chat, err := NewChatTemplate("test", tc.tmpl, "", "")
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		got, err := chat.Render([]Message{{"user", "hi?"}}, false, nil)
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
}
