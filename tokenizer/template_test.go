package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestTemplateRender(t *testing.T) {
	char, err := NewChar("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 :?\n+=", []string{"<bos>", "<eos>", "<pad>"})
	if err != nil {
		t.Fatal(err)
	}
	bpe := trainedBPE(t)
	for _, tc := range []struct {
		name string
		tmpl Template
		tok  Tokenizer
		want string
	}{
		{"plain bare", Template{}, char, "1+2="},
		{"plain system format", Template{Kind: KindPlain, System: "Solve.", Format: "Q: {question}\nA:"}, char, "Solve.\nQ: 1+2=\nA:"},
		{"chat without ChatML", Template{Kind: KindChat}, char, "User: 1+2=\nAssistant: "},
		{"chat system without ChatML", Template{Kind: KindChat, System: "Be brief."}, char, "Be brief.\nUser: 1+2=\nAssistant: "},
		{"chat ChatML", Template{Kind: KindChat}, bpe, "<|im_start|>user\n1+2=<|im_end|>\n<|im_start|>assistant\n"},
		{"chat ChatML system", Template{Kind: KindChat, System: "Be brief.", Format: "{question} Think."}, bpe,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+2= Think.<|im_end|>\n<|im_start|>assistant\n"},
	} {
		if err := tc.tmpl.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tc.name, err)
		}
		if got := tc.tmpl.RenderFor(tc.tok, "1+2="); got != tc.want {
			t.Errorf("%s: RenderFor = %q, want %q", tc.name, got, tc.want)
		}
		prompt := tc.tmpl.Prompt(tc.tok, "1+2=")
		want := tc.tok.Encode(tc.want)
		if bos := tc.tok.Special().BOS; bos >= 0 {
			want = append([]int{bos}, want...)
		}
		if !slices.Equal(prompt, want) {
			t.Errorf("%s: Prompt = %v, want %v", tc.name, prompt, want)
		}
	}
	if got := (Template{Kind: KindChat}).Render("hi"); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("Render = %q", got)
	}
	// The char tokenizer has a BOS; its prompt starts with it.
	if p := (Template{}).Prompt(char, "ab"); !slices.Equal(p, []int{0, 4, 5}) {
		t.Errorf("char Prompt = %v, want [0 4 5]", p)
	}
	// ChatML markers are single special tokens in the prompt.
	p := (Template{Kind: KindChat}).Prompt(bpe, "hi")
	start, _ := bpe.TokenID(IMStart)
	if p[0] != start || bpe.Decode(p) != "user\nhi\nassistant\n" {
		t.Errorf("ChatML Prompt = %v (%q)", p, bpe.Decode(p))
	}
}

func TestTemplateStopTokens(t *testing.T) {
	char, _ := NewChar("ab", []string{"<bos>", "<eos>"})
	noEOS, _ := NewChar("ab", nil)
	bpe := trainedBPE(t)
	for _, tc := range []struct {
		name string
		tmpl Template
		tok  Tokenizer
		want []int
	}{
		{"plain char", Template{}, char, []int{1}},
		{"chat char", Template{Kind: KindChat}, char, []int{1}},
		{"plain no eos", Template{}, noEOS, nil},
		{"plain bpe", Template{}, bpe, []int{0}},
		{"chat bpe", Template{Kind: KindChat}, bpe, []int{0, 2}},
	} {
		if got := tc.tmpl.StopTokens(tc.tok); !slices.Equal(got, tc.want) {
			t.Errorf("%s: StopTokens = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTemplateValidate(t *testing.T) {
	for _, tc := range []struct {
		tmpl Template
		want string
	}{
		{Template{Kind: "instruct"}, `kind "instruct"`},
		{Template{Format: "Answer this."}, "lacks {question}"},
	} {
		if err := tc.tmpl.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.tmpl, err, tc.want)
		}
	}
}
