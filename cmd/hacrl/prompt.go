package main

import (
	"fmt"
	"io"

	"github.com/hacrl/hacrl/tokenizer"
	"github.com/spf13/cobra"
)

func promptCmd() *cobra.Command {
	var (
		tf       templateFlags
		messages string
		noGen    bool
	)
	cmd := &cobra.Command{
		Use:   "prompt CHECKPOINT --messages FILE",
		Short: "Render a conversation with a saved agent's template, as text and token ids",
		Long: `Render a conversation exactly as a saved agent's template renders it, to
debug templates: --messages FILE (- for standard input) is a JSON list of
{"role", "content"}. Prints one JSON object: text (the rendered text), ids
(what the model is given: for plain and chat templates the BOS token first
when the tokenizer has one, then the text's tokens; for hf the text's
tokens, the template writing any BOS itself), template (the kind) and source
(where the kind came from: agent.json, --template or the default), and for
hf chat_template (the tokenizer_config.json the template is read from).
The generation prompt (the assistant's header) ends the text unless
--no-generation-prompt.

Plain and chat render whole conversations as they render a question (a
[system, user] conversation gives exactly the prompt training uses):
plain writes a system text and a newline, then the turns' texts, an
assistant's turn directly after the user's; chat writes ChatML turns
(<|im_start|>role ... <|im_end|>) when the tokenizer has those tokens,
otherwise "User: ...", "Assistant: ..." lines. They know the roles system,
user and assistant.

` + varsHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := tf.check(); err != nil {
				return err
			}
			if messages == "" {
				return usage("--messages FILE is required (- for standard input)")
			}
			r, err := openInput(cmd, messages)
			if err != nil {
				return err
			}
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", messages, err)
			}
			msgs, err := parseMessages(data)
			if err != nil {
				return fmt.Errorf("%s: %w", messages, err)
			}
			s, err := tf.load(cmd, args[0])
			if err != nil {
				return err
			}
			text, err := s.Template.RenderMessages(s.Tok, msgs, !noGen)
			if err != nil {
				return fmt.Errorf("%s: %w", messages, err)
			}
			ids, err := s.Template.PromptMessages(s.Tok, msgs, !noGen)
			if err != nil {
				return err
			}
			out := struct {
				Text         string `json:"text"`
				IDs          []int  `json:"ids"`
				Template     string `json:"template"`
				Source       string `json:"source"`
				ChatTemplate string `json:"chat_template,omitempty"`
			}{Text: text, IDs: ids, Template: s.Template.Kind, Source: tf.source(s)}
			if s.Template.Kind == tokenizer.KindHF && s.Template.Chat != nil {
				out.ChatTemplate = s.Template.Chat.Source()
			}
			return writeJSONLine(cmd.OutOrStdout(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&messages, "messages", "", "JSON list of {\"role\", \"content\"} (- for standard input)")
	f.BoolVar(&noGen, "no-generation-prompt", false, "leave out the assistant's generation prompt")
	tf.register(f, false)
	return cmd
}
