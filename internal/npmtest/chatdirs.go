package npmtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Chat-template layouts of the real tokenizers, as a checkpoint directory
// holds them (tokenizer files only, no agent.json). Keys of TemplateDirs.
const (
	// Qwen3 is the Qwen3 files as published: the template is the
	// chat_template of tokenizer_config.json.
	Qwen3 = "qwen3"
	// Llama3 is the Llama 3 files as published.
	Llama3 = "llama3"
	// Llama3Dated is the Llama 3 tokenizer with a Llama 3.2 Instruct style
	// template (tokenizer/testdata/llama3-dated.jinja): a dated system
	// header whose date is the date_string variable, else today's where
	// strftime_now is defined (transformers), else a fixed date.
	Llama3Dated = "llama3-dated"
	// Qwen3Jinja is Qwen3 as transformers 5 saves it: the template in a
	// chat_template.jinja, none in tokenizer_config.json.
	Qwen3Jinja = "qwen3-jinja"
	// Qwen3Both has Qwen3's template in chat_template.jinja and another in
	// tokenizer_config.json: the file wins, as in transformers.
	Qwen3Both = "qwen3-both"
)

// TemplateDirs writes the chat-template layouts above into temp dirs of t
// and returns them by name; dir is Dir's.
func TemplateDirs(t testing.TB, dir string) map[string]string {
	t.Helper()
	read := func(path string) []byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	config := func(model string) map[string]any {
		var c map[string]any
		if err := json.Unmarshal(read(filepath.Join(Model(dir, model), "tokenizer_config.json")), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	write := func(name, model string, cfg map[string]any, jinja string) string {
		out := filepath.Join(t.TempDir(), name)
		files := map[string][]byte{"tokenizer.json": read(filepath.Join(Model(dir, model), "tokenizer.json"))}
		data, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		files["tokenizer_config.json"] = data
		if jinja != "" {
			files["chat_template.jinja"] = []byte(jinja)
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(out, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	dirs := map[string]string{Qwen3: Model(dir, "qwen3"), Llama3: Model(dir, "llama3")}
	dated := config("llama3")
	dated["chat_template"] = string(read(filepath.Join(dir, "..", "llama3-dated.jinja")))
	dated["eos_token"] = "<|eot_id|>"
	dirs[Llama3Dated] = write(Llama3Dated, "llama3", dated, "")
	qwen := config("qwen3")
	tmpl := qwen["chat_template"].(string)
	delete(qwen, "chat_template")
	dirs[Qwen3Jinja] = write(Qwen3Jinja, "qwen3", qwen, tmpl)
	qwen["chat_template"] = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
	dirs[Qwen3Both] = write(Qwen3Both, "qwen3", qwen, tmpl)
	return dirs
}
