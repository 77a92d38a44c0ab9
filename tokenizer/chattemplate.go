package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	gonjacfg "github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// ConfigFile is the name of a Hugging Face checkpoint's tokenizer settings,
// beside its tokenizer.json.
const ConfigFile = "tokenizer_config.json"

// ChatTemplateFile is the chat template as a file of its own beside
// tokenizer_config.json, as transformers 5's save_pretrained writes it. When
// present it replaces the config's chat_template, as in transformers.
const ChatTemplateFile = "chat_template.jinja"

// TokenizerConfig is what hacrl reads of a Hugging Face
// tokenizer_config.json: the chat template and the special tokens.
type TokenizerConfig struct {
	// Path is the file the config was read from (for errors).
	Path string
	// ChatTemplate is the Jinja chat template: the text of the
	// chat_template.jinja beside the config when there is one, else
	// chat_template when it is a string, or the entry named "default" when
	// it is a list of {name, template}; "" when there is none.
	ChatTemplate string
	// TemplatePath is the file ChatTemplate was read from: Path, or the
	// chat_template.jinja beside it.
	TemplatePath string
	// BOS, EOS and PAD are the contents of bos_token, eos_token and
	// pad_token; "" when absent or null.
	BOS, EOS, PAD string
	// AddBOS is add_bos_token; nil when absent.
	AddBOS *bool
	// AddedTokens is added_tokens_decoder: id → token content.
	AddedTokens map[int]string
	// Raw is the file's bytes, to save beside a checkpoint unchanged.
	Raw []byte
	// RawTemplate is the bytes of the chat_template.jinja beside it; nil
	// when there is none.
	RawTemplate []byte
}

// ReadTokenizerConfig reads a tokenizer_config.json and the
// chat_template.jinja beside it, whose template replaces the config's
// chat_template (transformers reads them so). A missing config with a
// chat_template.jinja beside it reads as an empty config with that
// template. Errors name the file and the field.
func ReadTokenizerConfig(path string) (*TokenizerConfig, error) {
	jinjaPath := filepath.Join(filepath.Dir(path), ChatTemplateFile)
	jinja, err := os.ReadFile(jinjaPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && jinja != nil {
		data, err = []byte("{}"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	c, err := parseTokenizerConfig(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	c.Path = path
	if c.ChatTemplate != "" {
		c.TemplatePath = path
	}
	if jinja != nil {
		if !utf8.Valid(jinja) {
			return nil, fmt.Errorf("tokenizer: %s: not UTF-8 text", jinjaPath)
		}
		c.ChatTemplate, c.TemplatePath, c.RawTemplate = string(jinja), jinjaPath, jinja
	}
	return c, nil
}

// HasChatTemplate reports whether the Hugging Face tokenizer files in dir
// carry a chat template: a chat_template.jinja, or a tokenizer_config.json
// with a chat_template. A config that cannot be read is an error naming
// it; no config at all is false.
func HasChatTemplate(dir string) (bool, error) {
	path := filepath.Join(dir, ConfigFile)
	if _, err := os.Stat(filepath.Join(dir, ChatTemplateFile)); err == nil {
		return true, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	c, err := ReadTokenizerConfig(path)
	if err != nil {
		return false, err
	}
	return c.ChatTemplate != "", nil
}

// TemplateFiles returns the tokenizer_config.json and chat_template.jinja
// of dir that exist, by name, to save beside a checkpoint unchanged.
func TemplateFiles(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, name := range []string{ConfigFile, ChatTemplateFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		files[name] = data
	}
	return files, nil
}

func parseTokenizerConfig(data []byte) (*TokenizerConfig, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(err)
	}
	c := &TokenizerConfig{Raw: data}
	if raw, ok := f["chat_template"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &c.ChatTemplate); err != nil {
			var list []struct {
				Name     string  `json:"name"`
				Template *string `json:"template"`
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("chat_template: want a string or a list of {\"name\", \"template\"}, got %.80s", raw)
			}
			var names []string
			for i, e := range list {
				if e.Template == nil {
					return nil, fmt.Errorf("chat_template[%d]: no template", i)
				}
				if e.Name == "default" {
					c.ChatTemplate = *e.Template
				}
				names = append(names, strconv.Quote(e.Name))
			}
			if c.ChatTemplate == "" {
				return nil, fmt.Errorf("chat_template: no template named \"default\" among %s", strings.Join(names, ", "))
			}
		}
	}
	for _, tok := range []struct {
		field string
		dst   *string
	}{{"bos_token", &c.BOS}, {"eos_token", &c.EOS}, {"pad_token", &c.PAD}} {
		raw, ok := f[tok.field]
		if !ok || isNull(raw) {
			continue
		}
		if err := json.Unmarshal(raw, tok.dst); err != nil {
			var obj struct{ Content *string }
			if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
				return nil, fmt.Errorf("%s: want a token string, {\"content\": ...} or null, got %s", tok.field, raw)
			}
			*tok.dst = *obj.Content
		}
	}
	if raw, ok := f["add_bos_token"]; ok && !isNull(raw) {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("add_bos_token: want true or false, got %s", raw)
		}
		c.AddBOS = &b
	}
	if raw, ok := f["added_tokens_decoder"]; ok && !isNull(raw) {
		var dec map[string]struct{ Content *string }
		if err := json.Unmarshal(raw, &dec); err != nil {
			return nil, fmt.Errorf("added_tokens_decoder: want an object of id → {\"content\": ...}: %w", jsonError(err))
		}
		c.AddedTokens = make(map[int]string, len(dec))
		for k, v := range dec {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || v.Content == nil {
				return nil, fmt.Errorf("added_tokens_decoder[%q]: want a non-negative id with a content", k)
			}
			c.AddedTokens[id] = *v.Content
		}
	}
	return c, nil
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatTemplate is a compiled Hugging Face Jinja chat template. It renders as
// transformers' apply_chat_template does (trim_blocks and lstrip_blocks on,
// raise_exception available, tojson as transformers writes JSON; no strftime_now, so that a prompt does not
// depend on the day: such templates fall back to their fixed date unless a
// date_string variable is given). It is safe for concurrent use.
type ChatTemplate struct {
	source   string            // where the template came from, for errors
	files    map[string][]byte // the files it came from, by name (LoadChatTemplate)
	bos, eos string
	mu       sync.Mutex
	tpl      *exec.Template
}

// errRaised marks an error raised by the template itself.
var errRaised = errors.New("raise_exception")

// chatEnvironment is gonja's default environment plus raise_exception, with
// transformers' tojson (filterToJSON) in place of gonja's, and trim, strip,
// lstrip and rstrip that strip what Python does (filterTrim, chatMethods).
var chatEnvironment = func() *exec.Environment {
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("raise_exception", func(msg string) (string, error) {
		return "", fmt.Errorf("%w: %s", errRaised, msg)
	})
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	for name, filter := range map[string]exec.FilterFunction{"tojson": filterToJSON, "trim": filterTrim} {
		if err := filters.Replace(name, filter); err != nil {
			panic(err)
		}
	}
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           chatMethods(),
	}
}()

// NewChatTemplate compiles a chat template. source names where it came from
// (a tokenizer_config.json) in errors; bos and eos are the bos_token and
// eos_token the template sees.
func NewChatTemplate(source, text, bos, eos string) (*ChatTemplate, error) {
	cfg := gonjacfg.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	const name = "/chat_template" // memory loader keys are absolute paths
	// A memory loader: a template cannot include files.
	loader, err := loaders.NewMemoryLoader(map[string]string{name: text})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: chat_template: %w", source, err)
	}
	tpl, err := exec.NewTemplate(name, cfg, loader, chatEnvironment)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: chat_template does not parse: %s", source, trimGonja(err, text))
	}
	return &ChatTemplate{source: source, bos: bos, eos: eos, tpl: tpl}, nil
}

// LoadChatTemplate reads the chat template and special tokens of a
// tokenizer_config.json (the template from the chat_template.jinja beside
// it when there is one, see ReadTokenizerConfig) and compiles the
// template.
func LoadChatTemplate(path string) (*ChatTemplate, *TokenizerConfig, error) {
	c, err := ReadTokenizerConfig(path)
	if err != nil {
		return nil, nil, err
	}
	if c.ChatTemplate == "" {
		return nil, c, fmt.Errorf("tokenizer: %s: no chat_template (and no %s beside it)", path, ChatTemplateFile)
	}
	t, err := NewChatTemplate(c.TemplatePath, c.ChatTemplate, c.BOS, c.EOS)
	if err != nil {
		return nil, c, err
	}
	t.files = map[string][]byte{ConfigFile: c.Raw}
	if c.RawTemplate != nil {
		t.files[ChatTemplateFile] = c.RawTemplate
	}
	return t, c, nil
}

// Source is the file the template came from: a tokenizer_config.json or a
// chat_template.jinja.
func (c *ChatTemplate) Source() string { return c.source }

// Files returns the files the template was loaded from by name — the
// tokenizer_config.json and any chat_template.jinja (nil for
// NewChatTemplate) — to save beside a checkpoint.
func (c *ChatTemplate) Files() map[string][]byte { return c.files }

// reserved are the template variables Render sets itself.
var reserved = []string{"messages", "add_generation_prompt", "bos_token", "eos_token", "raise_exception"}

// ReservedVar reports whether name is a variable Render sets itself, which
// template variables from a config may not replace.
func ReservedVar(name string) bool {
	for _, r := range reserved {
		if r == name {
			return true
		}
	}
	return false
}

// Render renders messages. vars are extra template variables (such as
// Qwen3's enable_thinking); they cannot replace messages,
// add_generation_prompt, bos_token or eos_token. An error, including one the
// template raises, names the template's source.
func (c *ChatTemplate) Render(messages []Message, addGenerationPrompt bool, vars map[string]any) (string, error) {
	msgs := make(pyList, len(messages))
	for i, m := range messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	data := make(map[string]any, len(vars)+4)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ReservedVar(k) {
			return "", fmt.Errorf("tokenizer: %s: template variable %q is set by the renderer", c.source, k)
		}
		data[k] = vars[k]
	}
	data["messages"] = msgs
	data["add_generation_prompt"] = addGenerationPrompt
	for name, v := range map[string]string{"bos_token": c.bos, "eos_token": c.eos} {
		if v != "" { // absent or null in the config: undefined, as in transformers
			data[name] = v
		}
	}
	c.mu.Lock()
	out, err := c.tpl.ExecuteToString(exec.NewContext(data))
	c.mu.Unlock()
	if err != nil {
		if errors.Is(err, errRaised) || strings.Contains(err.Error(), errRaised.Error()+": ") {
			return "", fmt.Errorf("tokenizer: %s: chat_template raised an exception: %s", c.source, raisedMessage(err))
		}
		return "", fmt.Errorf("tokenizer: %s: chat_template: %s", c.source, trimGonja(err, ""))
	}
	return out, nil
}

// raisedMessage is the message a template passed to raise_exception.
func raisedMessage(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, errRaised.Error()+": "); i >= 0 {
		return s[i+len(errRaised.Error())+2:]
	}
	return s
}

// trimGonja shortens gonja's errors, which may quote the whole template.
func trimGonja(err error, text string) string {
	s := err.Error()
	if text != "" {
		s = strings.ReplaceAll(s, text, "…")
	}
	return s
}

// EndOfTurn returns the token the template closes an assistant turn with
// (<|im_end|> for ChatML, <|eot_id|> for Llama 3): the first token of what
// the template writes right after an assistant message's content, when that
// token is a special token of tok. ok is false when the template writes no
// such token.
func (c *ChatTemplate) EndOfTurn(tok Tokenizer, vars map[string]any) (id int, ok bool, err error) {
	const marker = "hacrl-end-of-turn-probe"
	out, err := c.Render([]Message{{Role: "user", Content: "1+1?"}, {Role: "assistant", Content: marker}}, false, vars)
	if err != nil {
		return 0, false, err
	}
	i := strings.LastIndex(out, marker)
	if i < 0 {
		return 0, false, nil
	}
	after := out[i+len(marker):]
	ids := tok.Encode(after)
	if len(ids) == 0 {
		return 0, false, nil
	}
	if tok.Decode(ids[:1]) != "" { // Decode skips special tokens only
		return 0, false, nil
	}
	return ids[0], true, nil
}
