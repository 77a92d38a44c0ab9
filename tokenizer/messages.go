package tokenizer

import (
	"fmt"
	"strings"
)

// RenderMessages returns the text of a whole conversation as t renders it
// for tok, ending with the assistant's generation prompt when
// addGenerationPrompt is set. The conversation [system (when t.System is
// set), user question] that t.Messages builds renders, with the generation
// prompt, exactly as RenderFor renders the question; the template's own
// System and Format are not applied again (the messages carry them).
//
// Plain: a system message is its text and a newline; a user message its
// text; an assistant message follows the turn before it directly (as a
// response follows its prompt) and is followed by a newline when more
// turns come; there is no generation prompt. Chat with the ChatML tokens:
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message and
// "<|im_start|>assistant\n" as the generation prompt. Chat without them:
// a system message is its text and a newline, then "User: {content}\n" and
// "Assistant: {content}\n", and "Assistant: " as the generation prompt.
// Plain and chat know the roles system, user and assistant only. Hf: the
// checkpoint's chat template with t.Vars.
func (t Template) RenderMessages(tok Tokenizer, msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.Kind == KindHF {
		if t.Chat == nil {
			return "", fmt.Errorf("tokenizer: template kind %q has no chat template loaded (LoadChat)", KindHF)
		}
		return t.Chat.Render(msgs, addGenerationPrompt, t.Vars)
	}
	chatML := t.Kind == KindChat && hasChatML(tok)
	var b strings.Builder
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("tokenizer: message %d: role %q: a %s template knows system, user and assistant", i, m.Role, t.kindName())
		}
		switch {
		case chatML:
			b.WriteString(IMStart + m.Role + "\n" + m.Content + IMEnd + "\n")
		case m.Role == "system":
			b.WriteString(m.Content + "\n")
		case t.Kind == KindChat && m.Role == "user":
			b.WriteString("User: " + m.Content + "\n")
		case t.Kind == KindChat:
			b.WriteString("Assistant: " + m.Content + "\n")
		case m.Role == "user":
			b.WriteString(m.Content)
		default: // plain assistant
			b.WriteString(m.Content)
			if i+1 < len(msgs) {
				b.WriteString("\n")
			}
		}
	}
	if addGenerationPrompt && t.Kind == KindChat {
		if chatML {
			b.WriteString(IMStart + "assistant\n")
		} else {
			b.WriteString("Assistant: ")
		}
	}
	return b.String(), nil
}

// PromptMessages returns the ids of a conversation rendered by
// RenderMessages, as Prompt returns a question's: for plain and chat
// templates the BOS token when tok has one, then the text; for hf the text
// alone (the template writes any BOS itself). PromptMessages(tok,
// t.Messages(q), true) equals Prompt(tok, q).
func (t Template) PromptMessages(tok Tokenizer, msgs []Message, addGenerationPrompt bool) ([]int, error) {
	s, err := t.RenderMessages(tok, msgs, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	var ids []int
	if bos := tok.Special().BOS; bos >= 0 && t.Kind != KindHF {
		ids = append(ids, bos)
	}
	return append(ids, tok.Encode(s)...), nil
}

func (t Template) kindName() string {
	if t.Kind == "" {
		return KindPlain
	}
	return t.Kind
}
