package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCorpusFromFiles(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "a.txt")
	os.WriteFile(text, []byte("first line\r\n\n  \nsecond line\nlast"), 0o644)
	jsonl := filepath.Join(dir, "b.jsonl")
	os.WriteFile(jsonl, []byte(`{"question":"What is 2+2?","answer":"4","idx":3}`+"\n\n"+`{"problem":"x","solution":""}`+"\n"), 0o644)
	got, err := CorpusFromFiles(text, jsonl)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"first line", "second line", "last", "4", "What is 2+2?", "x"}
	if !slices.Equal(got, want) {
		t.Errorf("CorpusFromFiles = %q, want %q", got, want)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"a\":\"b\"}\n[1,2]\n"), 0o644)
	if _, err := CorpusFromFiles(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("bad JSONL: err = %v, want file:line", err)
	}
	if _, err := CorpusFromFiles(filepath.Join(dir, "none.txt")); err == nil || !strings.Contains(err.Error(), "none.txt") {
		t.Errorf("missing file: err = %v", err)
	}
	// The real benchmarks read without error and hold their questions.
	corpus := benchmarkCorpus(t)
	if len(corpus) < 1319*2 || !slices.ContainsFunc(corpus, func(s string) bool { return strings.HasPrefix(s, "Janet’s ducks lay 16 eggs") }) {
		t.Errorf("benchmark corpus has %d documents, missing the first gsm8k question", len(corpus))
	}
}
