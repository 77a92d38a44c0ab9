package config_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config/internal/refdoc"
)

// TestReferenceUpToDate regenerates docs/config.md in memory: it fails when a
// config field lacks a doc comment, and when the file differs from what the
// schema says.
func TestReferenceUpToDate(t *testing.T) {
	docs, err := refdoc.ReadDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	if missing := refdoc.Undocumented(docs); len(missing) > 0 {
		t.Fatalf("config fields without a doc comment (docs/config.md is made from them):\n  %s", strings.Join(missing, "\n  "))
	}
	want, err := refdoc.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatalf("%v: run go generate ./config", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/config.md is out of date: run go generate ./config\nfirst difference, line %d:\n  file:   %s\n  schema: %s", i+1, g, w)
			}
		}
	}
}

// TestReferenceCoversSchema: every key of both config types has a row, with
// its default where the schema has one.
func TestReferenceCoversSchema(t *testing.T) {
	data, err := refdoc.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"| `agents[].sampling.top_p` | number | `1` |",
		"| `agents[].sampling.temperature` | number | `1` | `temperature` divides the logits before sampling; 0 means greedy decoding",
		"| `batch.responses_per_prompt` | integer | `8` |",
		"| `checkpoint.keep` | integer | `2` |",
		"| `eval.sets[].temperature` | number | `1` |",
		"| `agents[].model.kv_heads` | integer | heads |",
		"| `batch_size` | integer | `32` |",
		"| hacpo | `1` | `0.2` | `0.025` |",
		"| arith | `digits: 2`",
	} {
		if !bytes.Contains(data, []byte(row)) {
			t.Errorf("reference lacks %q", row)
		}
	}
}
