package tokenizer

import (
	"fmt"
	"strings"
)

// Template kinds.
const (
	KindPlain = "plain"
	KindChat  = "chat"
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
type Template struct {
	Kind   string // KindPlain or KindChat; "" means plain
	System string // optional system text
	// Format wraps the question, e.g. "{question}\nPut the answer in \\boxed{}.";
	// "" means the question alone.
	Format string
}

// Validate reports a template whose kind or format is not usable.
func (t Template) Validate() error {
	switch t.Kind {
	case "", KindPlain, KindChat:
	default:
		return fmt.Errorf("tokenizer: template kind %q: want %q or %q", t.Kind, KindPlain, KindChat)
	}
	if t.Format != "" && !strings.Contains(t.Format, QuestionPlaceholder) {
		return fmt.Errorf("tokenizer: template format %q lacks %s", t.Format, QuestionPlaceholder)
	}
	return nil
}

// Render returns the prompt text for question as the template renders it for
// a tokenizer with the ChatML special tokens; it is meant for logs.
func (t Template) Render(question string) string {
	return t.render(question, true)
}

// RenderFor returns the prompt text exactly as Prompt encodes it for tok
// (without the BOS token).
func (t Template) RenderFor(tok Tokenizer, question string) string {
	return t.render(question, hasChatML(tok))
}

// Prompt returns the prompt ids for question: the BOS token when tok has
// one, then the rendered prompt.
func (t Template) Prompt(tok Tokenizer, question string) []int {
	var ids []int
	if bos := tok.Special().BOS; bos >= 0 {
		ids = append(ids, bos)
	}
	return append(ids, tok.Encode(t.RenderFor(tok, question))...)
}

// StopTokens returns the ids that end a response: EOS and, for chat
// templates, <|im_end|>, each when tok has it.
func (t Template) StopTokens(tok Tokenizer) []int {
	var ids []int
	if eos := tok.Special().EOS; eos >= 0 {
		ids = append(ids, eos)
	}
	if t.Kind == KindChat {
		if id, ok := tok.TokenID(IMEnd); ok && (len(ids) == 0 || ids[0] != id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func (t Template) render(question string, chatML bool) string {
	q := question
	if t.Format != "" {
		q = strings.ReplaceAll(t.Format, QuestionPlaceholder, question)
	}
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
