package main

import (
	"fmt"

	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func tokenizerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tokenizer", Short: "Tokenizer tools"}
	var vocab int
	var out, kind, template string
	trainC := &cobra.Command{
		Use:   "train FILE...",
		Short: "Learn a byte-level BPE (or a char-level) tokenizer from text or JSONL files",
		Long: `Learn a tokenizer from a corpus (text files, one example per line, or JSONL
lines) and write it as a Hugging Face tokenizer.json. --kind bpe learns a
byte-level BPE vocabulary of --vocab-size tokens; --kind char keeps one token per
character of the corpus (plus printable ASCII). Special tokens: <pad> <s> </s>
<unk>, and the ChatML markers with --template chat.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			corpus, err := tokenizer.CorpusFromFiles(args...)
			if err != nil {
				return err
			}
			var tok tokenizer.Tokenizer
			switch kind {
			case "bpe":
				tok, err = tokenizer.TrainBPE(cmd.Context(), corpus, vocab, train.Specials(template))
			case "char":
				tok, err = tokenizer.NewChar(train.Alphabet(corpus), train.Specials(template))
			default:
				return usage("--kind must be bpe or char, got %q", kind)
			}
			if err != nil {
				return err
			}
			if err := tok.Save(out); err != nil {
				return err
			}
			fmt.Printf("wrote %s: %d tokens from %d texts\n", out, tok.VocabSize(), len(corpus))
			return nil
		},
	}
	trainC.Flags().IntVar(&vocab, "vocab-size", 512, "vocabulary size (bpe)")
	trainC.Flags().StringVar(&out, "out", "tokenizer.json", "output file")
	trainC.Flags().StringVar(&kind, "kind", "bpe", "bpe or char")
	trainC.Flags().StringVar(&template, "template", "plain", "plain or chat (chat adds <|im_start|> and <|im_end|>)")
	cmd.AddCommand(trainC)
	return cmd
}
