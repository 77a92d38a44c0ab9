package rollout

import (
	"reflect"
	"testing"

	"github.com/hacrl/hacrl/tokenizer"
)

func TestViewRetokenizes(t *testing.T) {
	// Learner 1 has a char tokenizer without 'z': agent 0's "z" does not survive.
	tok, err := tokenizer.NewChar("0123456789+=", []string{"<pad>", "</s>", "<unk>"})
	if err != nil {
		t.Fatal(err)
	}
	eos := tok.Special().EOS
	pool := &Pool{Agents: 2, Prompts: 2, Rollouts: []Rollout{
		{Prompt: 0, Source: 0, Text: "12", Tokens: []int{900, 901, 7}, Stopped: true, OldLogProbs: []float32{-1, -2, -3}},
		{Prompt: 1, Source: 0, Text: "3z", Tokens: []int{902, 903}, Stopped: false},
		{Prompt: 0, Source: 1, Text: "4", Tokens: []int{4, eos}, Stopped: true},
		{Prompt: 1, Source: 0, Text: "123456", Tokens: []int{1}, Stopped: true},
	}}
	prompts := [][]int{{1}, {2}}
	v, err := pool.View(Learner{Index: 1, Tokenizer: tok, Prompts: prompts, Stop: eos, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string) []int { return tok.Encode(s) }
	want := [][]int{
		append(enc("12"), eos), // stopped: learner's EOS appended
		enc("3z"),              // cut at the length limit: no EOS
		{4, eos},               // self: original ids
		enc("1234"),            // cut to MaxTokens
	}
	for i, it := range v.Items {
		if !reflect.DeepEqual(it.Response, want[i]) {
			t.Errorf("item %d: response %v, want %v", i, it.Response, want[i])
		}
		if !reflect.DeepEqual(it.Prompt, prompts[pool.Rollouts[i].Prompt]) {
			t.Errorf("item %d: prompt %v", i, it.Prompt)
		}
	}
	if !v.Items[2].Self || v.Items[0].Self {
		t.Errorf("self flags wrong")
	}
	if !v.Items[1].Changed || v.Items[0].Changed || !v.Items[3].Cut || v.Items[0].Cut {
		t.Errorf("changed/cut flags: %+v", v.Items)
	}
	if v.Changed[0] != 1 || v.Total[0] != 3 || v.ChangedFrac(0) != 1.0/3 || v.ChangedFrac(1) != 0 {
		t.Errorf("changed counts %v / %v", v.Changed, v.Total)
	}
	if got := pool.Rollouts[0].OldMeanLogProb(); got != -2 {
		t.Errorf("OldMeanLogProb = %v, want -2", got)
	}
	if g := pool.Groups(); !reflect.DeepEqual(g, [][]int{{0, 2}, {1, 3}}) {
		t.Errorf("Groups = %v", g)
	}
	if _, err := pool.View(Learner{Index: 0, Tokenizer: tok, Prompts: prompts[:1]}); err == nil {
		t.Error("want an error for a prompt count mismatch")
	}
}
