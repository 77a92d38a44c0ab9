package experiment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hacrl/hacrl/config"
)

// The grids and SFT configs shipped in examples/experiment load, every cell's
// config is valid, and every agent they name is shipped.
func TestShippedGrids(t *testing.T) {
	root := filepath.Join("..")
	grids, err := filepath.Glob(filepath.Join(root, "examples", "experiment", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range grids {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var agents []config.Agent
			if c, err := Load(path); err == nil {
				n++
				for _, s := range c.Settings {
					agents = append(agents, s.Agents...)
				}
			} else if rc, err2 := config.Load(path); err2 == nil { // a single run, such as a pilot
				agents = rc.Agents
			} else {
				t.Fatalf("neither a grid (%v) nor a run config (%v)", err, err2)
			}
			for _, a := range agents {
				if _, err := os.Stat(filepath.Join(root, a.Checkpoint, "model.safetensors")); err != nil {
					t.Errorf("agent %s: %v", a.Name, err)
				}
			}
		})
	}
	if n < 2 {
		t.Errorf("%d grids loaded from %d files, want grid.yaml and settings-extra.yaml at least", n, len(grids))
	}
	sfts, err := filepath.Glob(filepath.Join(root, "examples", "experiment", "sft", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range sfts {
		if _, err := config.LoadSFT(path); err != nil {
			t.Errorf("%v", err)
			continue
		}
		name := filepath.Base(path[:len(path)-len(".yaml")])
		if _, err := os.Stat(filepath.Join(root, "examples", "experiment", "agents", name, "model.safetensors")); err != nil {
			t.Errorf("%s: the agent it makes is not shipped: %v", path, err)
		}
	}
}
