//go:build !xla

package backend

import (
	"strings"
	"testing"
)

func TestNoXLA(t *testing.T) {
	for _, cfg := range []string{"xla:cuda", "xla:cpu", "xla"} {
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), "-tags xla") {
			t.Errorf("New(%q) in a build without XLA: error %v, want one saying to build with -tags xla", cfg, err)
		}
	}
}
