package tokenizer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hacrl/hacrl/internal/shared"
)

// roundTripTexts exercise multi-byte UTF-8, whitespace and special tokens.
var roundTripTexts = []string{
	"",
	"Janet has 16 eggs. She eats 3 and bakes 4; how many are left?",
	"héllo wörld, naïve café",
	"日本語のテキストと中文文本",
	"emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
	"   leading and trailing   ",
	"tabs\tand\nnewlines\r\n\r\nx",
	"don't DON'T it's we'll",
	"12345678 3.14159 -2e10",
	"$\\frac{9}{s} + t = 4$ and \\boxed{204}",
}

func benchmarkCorpus(t testing.TB) []string {
	t.Helper()
	dir, err := shared.Benchmarks()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, name := range []string{"gsm8k", "aime24", "amc23", "minerva_math"} {
		paths = append(paths, filepath.Join(dir, name, "test.jsonl"))
	}
	corpus, err := CorpusFromFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return corpus
}

func totalBytes(corpus []string) int {
	n := 0
	for _, s := range corpus {
		n += len(s)
	}
	return n
}

var chatSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

var (
	trainedOnce sync.Once
	trained     *BPE
	trainedErr  error
	trainedTime time.Duration
)

// trainedBPE is a 1000-token byte-level BPE learned once from the benchmarks.
func trainedBPE(t testing.TB) *BPE {
	t.Helper()
	trainedOnce.Do(func() {
		corpus := benchmarkCorpus(t)
		start := time.Now()
		trained, trainedErr = TrainBPE(context.Background(), corpus, 1000, chatSpecials)
		trainedTime = time.Since(start)
	})
	if trainedErr != nil {
		t.Fatal(trainedErr)
	}
	return trained
}

func TestTrainBPE(t *testing.T) {
	tok := trainedBPE(t)
	corpus := benchmarkCorpus(t)
	t.Logf("trained 1000 tokens on %d bytes in %v", totalBytes(corpus), trainedTime)
	if tok.VocabSize() != 1000 {
		t.Errorf("VocabSize = %d, want 1000", tok.VocabSize())
	}
	if got, want := len(tok.mergeList), 1000-256-len(chatSpecials); got != want {
		t.Errorf("%d merges, want %d", got, want)
	}
	for i, s := range chatSpecials {
		if id, ok := tok.TokenID(s); !ok || id != i {
			t.Errorf("TokenID(%q) = %d, %v; want %d", s, id, ok, i)
		}
	}
	if got := tok.Special(); got != (Specials{BOS: -1, EOS: 0, PAD: -1, UNK: -1}) {
		t.Errorf("Special = %+v", got)
	}
	// Frequent words of the corpus become single tokens.
	for _, w := range []string{"Ġthe", "Ġof", "Ġ="} {
		if _, ok := tok.TokenID(w); !ok {
			t.Errorf("no token %q after training on the benchmarks", w)
		}
	}
	// The tokenizer compresses its corpus well below one token per byte.
	ids := 0
	for _, s := range corpus[:500] {
		ids += len(tok.Encode(s))
	}
	if ratio := float64(totalBytes(corpus[:500])) / float64(ids); ratio < 2.2 {
		t.Errorf("%.2f bytes per token, want at least 2.2", ratio)
	}
	if trainedTime > 30*time.Second {
		t.Errorf("training took %v, want seconds", trainedTime)
	}
}

func TestTrainBPEDeterministic(t *testing.T) {
	corpus := benchmarkCorpus(t)[:400]
	a, err := TrainBPE(context.Background(), corpus, 500, []string{"<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := TrainBPE(context.Background(), corpus, 500, []string{"<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := a.marshal()
	jb, _ := b.marshal()
	if string(ja) != string(jb) {
		t.Fatal("two trainings on the same corpus wrote different tokenizer.json files")
	}
	// The first merge is the most frequent pair of the corpus.
	counts := make(map[[2]int32]int64)
	for _, doc := range corpus {
		for _, w := range (splitter{}).split(nil, doc) {
			for i := 0; i+1 < len(w); i++ {
				counts[[2]int32{int32(1 + int(w[i])), int32(1 + int(w[i+1]))}]++
			}
		}
	}
	var best [2]int32
	for p, n := range counts {
		if n > counts[best] || n == counts[best] && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
			best = p
		}
	}
	if a.mergeList[0] != best {
		t.Errorf("first merge %v (%q %q), want the most frequent pair %v", a.mergeList[0],
			a.tokens[a.mergeList[0][0]], a.tokens[a.mergeList[0][1]], best)
	}
}

func TestTrainBPEErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := TrainBPE(ctx, []string{"abc"}, 257, []string{"<s>", "</s>"}); err == nil || !strings.Contains(err.Error(), "below 258") {
		t.Errorf("vocab too small: err = %v", err)
	}
	if _, err := TrainBPE(ctx, []string{"abc"}, 300, []string{"<s>", "<s>"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate special: err = %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := TrainBPE(cancelled, []string{"abc abc"}, 300, nil); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("cancelled context: err = %v", err)
	}
	// A tiny corpus stops early: no pair is seen twice after a few merges.
	tok, err := TrainBPE(ctx, []string{"abab abab"}, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() >= 1000 || tok.VocabSize() <= 256 {
		t.Errorf("VocabSize = %d after a tiny corpus", tok.VocabSize())
	}
	// Merges: "a b" (4×), then "ab ab" (2×); " abab" occurs once, so the
	// space stays a byte token.
	if ids := tok.Encode("abab abab"); len(ids) != 3 || ids[0] != ids[2] || ids[1] != ' ' {
		t.Errorf("Encode(training text) = %v, want [abab Ġ abab]", ids)
	}
}

func TestBPERoundTrip(t *testing.T) {
	tok := trainedBPE(t)
	for _, text := range roundTripTexts {
		ids := tok.Encode(text)
		if got := tok.Decode(ids); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Errorf("Encode(%q) gave id %d outside [0, %d)", text, id, tok.VocabSize())
			}
		}
	}
	if ids := tok.Encode(""); len(ids) != 0 {
		t.Errorf("Encode(\"\") = %v", ids)
	}
}

func TestBPESpecialTokensInText(t *testing.T) {
	tok := trainedBPE(t)
	ids := tok.Encode("<|im_start|>user\nHi<|im_end|><|endoftext|>")
	start, _ := tok.TokenID(IMStart)
	end, _ := tok.TokenID(IMEnd)
	eot, _ := tok.TokenID("<|endoftext|>")
	if ids[0] != start || ids[len(ids)-2] != end || ids[len(ids)-1] != eot {
		t.Errorf("Encode = %v, want %d first and %d, %d last", ids, start, end, eot)
	}
	if slices.Contains(ids[1:len(ids)-2], start) || slices.Contains(ids[1:len(ids)-2], end) {
		t.Errorf("Encode = %v: special ids inside the text part", ids)
	}
	if got := tok.Decode(ids); got != "user\nHi" {
		t.Errorf("Decode skips specials: got %q", got)
	}
	// Invalid UTF-8 from a partial multi-byte sequence decodes to U+FFFD.
	emoji := tok.Encode("😀")
	if len(emoji) < 2 {
		t.Fatalf("emoji is one token (%v); want several byte-level tokens", emoji)
	}
	if got := tok.Decode(emoji[:len(emoji)-1]); got != "\uFFFD" {
		t.Errorf("Decode(partial emoji) = %q, want U+FFFD", got)
	}
}

func TestSaveLoadIdentical(t *testing.T) {
	char, err := NewChar("abcdefghijklmnopqrstuvwxyz0123456789 +-*/=.,?\n", []string{"<bos>", "<eos>", "<pad>"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, tok := range map[string]Tokenizer{"bpe": trainedBPE(t), "char": char} {
		path := filepath.Join(dir, name, "tokenizer.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := tok.Save(path); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, isChar := loaded.(*Char); isChar != (name == "char") {
			t.Errorf("%s: Load returned %T", name, loaded)
		}
		if loaded.VocabSize() != tok.VocabSize() || loaded.Special() != tok.Special() {
			t.Errorf("%s: loaded size %d specials %+v, want %d %+v", name, loaded.VocabSize(), loaded.Special(), tok.VocabSize(), tok.Special())
		}
		for _, text := range append(roundTripTexts, "<|im_start|>x<|im_end|>", "<bos>12+3=15<eos>") {
			if got, want := loaded.Encode(text), tok.Encode(text); !slices.Equal(got, want) {
				t.Errorf("%s: loaded Encode(%q) = %v, want %v", name, text, got, want)
			}
		}
		// Saving the loaded tokenizer writes the same bytes.
		again := filepath.Join(dir, name, "again.json")
		if err := loaded.Save(again); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(path)
		b, _ := os.ReadFile(again)
		if string(a) != string(b) {
			t.Errorf("%s: Save(Load(f)) differs from f", name)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("%s: temporary file %s left behind", name, e.Name())
			}
		}
	}
}

// naiveMerges is the textbook BPE loop, recounting every pair each step;
// the incremental trainer must learn exactly the same merges.
func naiveMerges(corpus []string, nspecial, vocabSize int) [][2]int32 {
	counts := make(map[string]int)
	for _, doc := range corpus {
		for _, w := range (splitter{}).split(nil, doc) {
			counts[w]++
		}
	}
	var words [][]int32
	var freq []int
	for w, n := range counts {
		syms := make([]int32, len(w))
		for i := range len(w) {
			syms[i] = int32(nspecial + int(w[i]))
		}
		words, freq = append(words, syms), append(freq, n)
	}
	tokens := make([]string, nspecial+256)
	for b := range 256 {
		tokens[nspecial+b] = string(byteToRune[b])
	}
	var merges [][2]int32
	for len(tokens) < vocabSize {
		pairs := make(map[[2]int32]int)
		for i, syms := range words {
			for k := 0; k+1 < len(syms); k++ {
				pairs[[2]int32{syms[k], syms[k+1]}] += freq[i]
			}
		}
		best, bestN := [2]int32{}, 0
		for p, n := range pairs {
			if n > bestN || n == bestN && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
				best, bestN = p, n
			}
		}
		if bestN < minPairCount {
			break
		}
		s := tokens[best[0]] + tokens[best[1]]
		id := int32(slices.Index(tokens, s))
		if id < 0 {
			id = int32(len(tokens))
			tokens = append(tokens, s)
		}
		merges = append(merges, best)
		for i, syms := range words {
			out := syms[:0]
			for k := 0; k < len(syms); k++ {
				if k+1 < len(syms) && syms[k] == best[0] && syms[k+1] == best[1] {
					out = append(out, id)
					k++
				} else {
					out = append(out, syms[k])
				}
			}
			words[i] = out
		}
	}
	return merges
}

func TestTrainBPEMatchesNaiveLoop(t *testing.T) {
	for _, corpus := range [][]string{
		benchmarkCorpus(t)[:150],
		{"aaaa aaaa aaa", "abababab ba ba", "zzzzzzzzz"}, // overlapping pairs
	} {
		tok, err := TrainBPE(context.Background(), corpus, 420, []string{"<s>"})
		if err != nil {
			t.Fatal(err)
		}
		want := naiveMerges(corpus, 1, 420)
		if !slices.Equal(tok.mergeList, want) {
			t.Errorf("merges differ from the naive loop: got %d, want %d merges; first difference at %d", len(tok.mergeList), len(want), firstDiff(tok.mergeList, want))
		}
	}
}

func firstDiff(a, b [][2]int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestBPEConcurrentEncode(t *testing.T) {
	tok := trainedBPE(t)
	corpus := benchmarkCorpus(t)[:200]
	want := make([][]int, len(corpus))
	for i, s := range corpus {
		want[i] = tok.Encode(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range corpus {
				k := (i + 50*g) % len(corpus)
				if got := tok.Encode(corpus[k]); !slices.Equal(got, want[k]) {
					errs <- corpus[k]
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%.40q) differs", s)
	}
}

func BenchmarkEncode(b *testing.B) {
	tok := trainedBPE(b)
	corpus := benchmarkCorpus(b)
	b.SetBytes(int64(totalBytes(corpus)))
	for b.Loop() {
		for _, s := range corpus {
			tok.Encode(s)
		}
	}
}

func BenchmarkTrainBPE(b *testing.B) {
	corpus := benchmarkCorpus(b)
	for b.Loop() {
		if _, err := TrainBPE(context.Background(), corpus, 2000, chatSpecials); err != nil {
			b.Fatal(err)
		}
	}
}
