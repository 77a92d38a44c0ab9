package train

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckpointDirErr: an agent's checkpoint that is not a directory here
// is refused naming agents[i].checkpoint and what a model directory holds;
// a path shaped like a hub id also says that hacrl downloads nothing and how
// to make the directory.
func TestCheckpointDirErr(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct {
		i              int
		path           string
		want, unwanted []string
	}{
		{0, dir, nil, nil},
		{1, "examples/agents/llama-bp", []string{"agents[1].checkpoint: no directory examples/agents/llama-bp", "config.json, model.safetensors"}, []string{"hub id"}},
		{0, "Qwen/Qwen3-0.6B", []string{"agents[0].checkpoint: no directory Qwen/Qwen3-0.6B", "hacrl downloads nothing", "hf download Qwen/Qwen3-0.6B --local-dir DIR"}, nil},
		{2, file, []string{"agents[2].checkpoint: " + file + " is a file"}, []string{"hub id"}},
	}
	for _, tc := range tests {
		err := ModelDirError(fmt.Sprintf("agents[%d].checkpoint", tc.i), tc.path)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.path, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", tc.path)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.path, err, w)
			}
		}
		for _, w := range tc.unwanted {
			if strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q says %q", tc.path, err, w)
			}
		}
	}
}
