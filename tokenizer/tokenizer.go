// Package tokenizer turns text into token ids and back for hacrl's agents.
//
// Two kinds are built here: a char-level tokenizer (one token per Unicode
// character, NewChar) and a byte-level BPE tokenizer learned from a corpus
// (TrainBPE). Both are saved as Hugging Face tokenizer.json files that the HF
// tokenizers libraries load and encode identically, and Load reads those files
// as well as real byte-level BPE tokenizers such as GPT-2, Llama 3 and Qwen2.
// Template renders a question into an agent's prompt: plain text, ChatML, or
// (kind "hf") the checkpoint's own Jinja chat_template from its
// tokenizer_config.json, or from the chat_template.jinja beside it that
// replaces it (ReadTokenizerConfig), compiled once by LoadChatTemplate and
// rendered as transformers' apply_chat_template does, on the gonja engine.
// A checkpoint with a chat template and no agent.json is prompted with its
// template; plain on request (see train.DefaultTemplateKind).
// Template.StopTokens lists every token that ends a response, the
// template's end-of-turn token (<|im_end|>, <|eot_id|>) first. The real
// Qwen3 and Llama 3 files are checked against @lenml/tokenizers and
// @huggingface/jinja (package internal/npmtest installs them) and against
// the Python libraries, tokenizers, AutoTokenizer and apply_chat_template
// (package internal/pyenv), in the tests.
//
// Encode never adds special tokens, but the text of an added token inside the
// input ("<|im_end|>") maps to that token's id. Decode skips special tokens
// and turns invalid UTF-8 into U+FFFD, one per maximal ill-formed sequence.
// All tokenizers are safe for concurrent use.
package tokenizer

// Tokenizer converts between text and token ids.
type Tokenizer interface {
	// Encode returns the ids of text without adding special tokens; the
	// texts of added tokens present in text map to their ids.
	Encode(text string) []int
	// Decode returns the text of ids, skipping special tokens and ids
	// outside the vocabulary.
	Decode(ids []int) string
	// VocabSize is one more than the largest id.
	VocabSize() int
	// Special returns the ids of the special roles, −1 where absent.
	Special() Specials
	// TokenID returns the id of a token as written in the vocabulary.
	TokenID(token string) (int, bool)
	// Save writes the tokenizer as a Hugging Face tokenizer.json, atomically.
	Save(path string) error
}

// Specials holds the ids of the special-token roles, −1 when absent.
type Specials struct {
	BOS, EOS, PAD, UNK int
}

// Role names: a special token whose content is in one of these lists takes
// the role; the first name in the list that is present wins. UNK is the BPE
// model's unk_token when it has one.
var (
	BOSNames = []string{"<s>", "<bos>", "<|begin_of_text|>", "<|startoftext|>", "<|bos|>", "[BOS]"}
	EOSNames = []string{"</s>", "<eos>", "<|end_of_text|>", "<|endoftext|>", "<|eos|>", "[EOS]"}
	PADNames = []string{"<pad>", "<|pad|>", "<|padding|>", "[PAD]"}
	UNKNames = []string{"<unk>", "<|unk|>", "[UNK]"}
)

// ChatML markers used by Template for chat prompts.
const (
	IMStart = "<|im_start|>"
	IMEnd   = "<|im_end|>"
)
