package train

import (
	"context"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
)

// agents[].compute_dtype reaches the agent's model and its reference;
// bfloat16 on the Go backend, which computes bfloat16 products wrongly, is
// refused by New with the agent and the field.
func TestComputeDTypeReachesAgents(t *testing.T) {
	cfg := loraTinyConfig(t, t.TempDir(), 1)
	cfg.Agents[1].ComputeDType = "float32"
	run, err := New(context.Background(), cfg, Options{Observer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range run.Agents() {
		if got := a.Model.ComputeDType(); got != dtypes.Float32 {
			t.Errorf("%s computes in %s, want float32", a.Name, got)
		}
	}

	cfg = loraTinyConfig(t, t.TempDir(), 1)
	cfg.Agents[1].ComputeDType = "bfloat16"
	_, err = New(context.Background(), cfg, Options{Observer: &recorder{}})
	want := "agents[1].compute_dtype (line 14): model: compute dtype bfloat16 needs the XLA backend"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bfloat16 on the Go backend: error %v, want one containing %q", err, want)
	}
}
