package tokenizer

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Template kinds.
const (
	KindPlain = "plain"
	KindChat  = "chat"
	// KindHF is the checkpoint's own Jinja chat_template from the
	// tokenizer_config.json beside its tokenizer.json, or the
	// chat_template.jinja beside it that replaces it.
	KindHF = "hf"
)

// QuestionPlaceholder is replaced by the question in Template.Format.
const QuestionPlaceholder = "{question}"

// Template renders a question into an agent's prompt.
//
// A "plain" template renders System (if set) and a newline, then the
// formatted question. A "chat" template renders a ChatML conversation,
//
//	<|im_start|>system\n{System}<|im_end|>\n      (only when System is set)
//	<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n
//
// when the tokenizer has the <|im_start|> and <|im_end|> special tokens, and
// otherwise the plain-text form "{System}\nUser: {question}\nAssistant: ".
//
// An "hf" template renders the conversation [system message (when System is
// set), user message = the formatted question] with the checkpoint's own
// Jinja chat_template and add_generation_prompt true, as transformers'
// apply_chat_template does, with Vars as extra template variables (Qwen3's
// enable_thinking). Its prompt is the rendered text encoded without adding
// special tokens: a template that writes the BOS token (Llama 3) has it once.
// LoadChat must attach the compiled template before use.
type Template struct {
	Kind   string // KindPlain, KindChat or KindHF; "" means plain
	System string // optional system text
	// Format wraps the question, e.g. "{question}\nPut the answer in \\boxed{}.";
	// "" means the question alone.
	Format string
	// Vars are template variables of an hf template.
	Vars map[string]any
	// Chat is the compiled chat template of an hf template (see LoadChat).
	Chat *ChatTemplate
	// EndOfTurn is the hf template's end-of-turn token (<|im_end|>,
	// <|eot_id|>), −1 when it writes none; set by LoadChat.
	EndOfTurn int
	// ExtraStops are more ids that end a response, such as the eos_token_id
	// list of a checkpoint's generation_config.json.
	ExtraStops []int
}

// Validate reports a template whose kind or format is not usable.
func (t Template) Validate() error {
	switch t.Kind {
	case "", KindPlain, KindChat:
		if len(t.Vars) > 0 {
			return fmt.Errorf("tokenizer: template vars apply to kind %q only, not %q", KindHF, t.Kind)
		}
	case KindHF:
		for _, k := range sortedKeys(t.Vars) {
			if ReservedVar(k) {
				return fmt.Errorf("tokenizer: template variable %q is set by the renderer and cannot be given", k)
			}
		}
	default:
		return fmt.Errorf("tokenizer: template kind %q: want %q, %q or %q", t.Kind, KindPlain, KindChat, KindHF)
	}
	if t.Format != "" && !strings.Contains(t.Format, QuestionPlaceholder) {
		return fmt.Errorf("tokenizer: template format %q lacks %s", t.Format, QuestionPlaceholder)
	}
	return nil
}

// Render returns the prompt text for question as the template renders it for
// a tokenizer with the ChatML special tokens; it is meant for logs.
func (t Template) Render(question string) string {
	if t.Kind == KindHF {
		s, err := t.renderHF(question)
		if err != nil {
			return err.Error()
		}
		return s
	}
	return t.render(question, true)
}

// RenderFor returns the prompt text exactly as Prompt encodes it for tok
// (without the BOS token of plain and chat templates). It panics where
// Prompt does.
func (t Template) RenderFor(tok Tokenizer, question string) string {
	if t.Kind == KindHF {
		s, err := t.renderHF(question)
		if err != nil {
			panic(err)
		}
		return s
	}
	return t.render(question, hasChatML(tok))
}

// Prompt returns the prompt ids for question: for plain and chat templates
// the BOS token when tok has one, then the rendered prompt; for hf templates
// the rendered prompt alone (the template writes any BOS itself). An hf
// template whose rendering fails for this question (LoadChat checked that it
// renders one) panics with the error: use PromptErr where the question comes
// from a user.
func (t Template) Prompt(tok Tokenizer, question string) []int {
	ids, err := t.PromptErr(tok, question)
	if err != nil {
		panic(err)
	}
	return ids
}

// PromptErr is Prompt returning the hf template's rendering error.
func (t Template) PromptErr(tok Tokenizer, question string) ([]int, error) {
	if t.Kind == KindHF {
		s, err := t.renderHF(question)
		if err != nil {
			return nil, err
		}
		return tok.Encode(s), nil
	}
	var ids []int
	if bos := tok.Special().BOS; bos >= 0 {
		ids = append(ids, bos)
	}
	return append(ids, tok.Encode(t.RenderFor(tok, question))...), nil
}

// Messages is the conversation an hf template renders for question.
func (t Template) Messages(question string) []Message {
	var m []Message
	if t.System != "" {
		m = append(m, Message{Role: "system", Content: t.System})
	}
	return append(m, Message{Role: "user", Content: t.format(question)})
}

func (t Template) renderHF(question string) (string, error) {
	if t.Chat == nil {
		return "", fmt.Errorf("tokenizer: template kind %q has no chat template loaded (LoadChat)", KindHF)
	}
	return t.Chat.Render(t.Messages(question), true, t.Vars)
}

// StopTokens returns the ids that end a response, the one an appended
// response is closed with first. Plain: EOS. Chat: EOS, then <|im_end|>.
// Hf: the template's end-of-turn token, then EOS (tokenizer_config.json's
// eos_token). Each only when tok has it; then ExtraStops; no id twice.
func (t Template) StopTokens(tok Tokenizer) []int {
	var ids []int
	add := func(id int) {
		if id >= 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if t.Kind == KindHF && t.Chat != nil {
		add(t.EndOfTurn)
	}
	add(tok.Special().EOS)
	if t.Kind == KindChat {
		if id, ok := tok.TokenID(IMEnd); ok {
			add(id)
		}
	}
	for _, id := range t.ExtraStops {
		add(id)
	}
	return ids
}

// LoadChat prepares an hf template for tok, whose tokenizer.json is at
// tokPath: it compiles the chat template of the tokenizer_config.json (or
// chat_template.jinja) beside it, finds the end-of-turn token and renders a probe prompt, so that a
// template that cannot render a question fails here, naming its file.
// Other kinds are left as they are.
func (t *Template) LoadChat(tokPath string, tok Tokenizer) error {
	if t.Kind != KindHF {
		return nil
	}
	if err := t.Validate(); err != nil {
		return err
	}
	chat, _, err := LoadChatTemplate(filepath.Join(filepath.Dir(tokPath), ConfigFile))
	if err != nil {
		return err
	}
	t.Chat = chat
	id, ok, err := chat.EndOfTurn(tok, t.Vars)
	if err != nil {
		return err
	}
	t.EndOfTurn = -1
	if ok {
		t.EndOfTurn = id
	}
	_, err = t.PromptErr(tok, "What is 1+1?")
	return err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// format wraps question in Format.
func (t Template) format(question string) string {
	if t.Format == "" {
		return question
	}
	return strings.ReplaceAll(t.Format, QuestionPlaceholder, question)
}

func (t Template) render(question string, chatML bool) string {
	q := t.format(question)
	var b strings.Builder
	switch {
	case t.Kind != KindChat:
		if t.System != "" {
			b.WriteString(t.System + "\n")
		}
		b.WriteString(q)
	case chatML:
		if t.System != "" {
			b.WriteString(IMStart + "system\n" + t.System + IMEnd + "\n")
		}
		b.WriteString(IMStart + "user\n" + q + IMEnd + "\n" + IMStart + "assistant\n")
	default:
		if t.System != "" {
			b.WriteString(t.System + "\n")
		}
		b.WriteString("User: " + q + "\nAssistant: ")
	}
	return b.String()
}

// hasChatML reports whether tok has both ChatML markers as tokens.
func hasChatML(tok Tokenizer) bool {
	_, start := tok.TokenID(IMStart)
	_, end := tok.TokenID(IMEnd)
	return start && end
}
