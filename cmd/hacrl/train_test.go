package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/train"
)

// TestPrintDefaults: `hacrl train --print-defaults` prints the resolved
// config, flags applied, and trains nothing.
func TestPrintDefaults(t *testing.T) {
	t.Chdir("../..")
	out := filepath.Join(t.TempDir(), "run")
	cmd := trainCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"--print-defaults", "--steps", "3", "--out", out, "examples/arith-hacpo.yaml"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("examples/arith-hacpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Steps, cfg.Out = 3, out
	want, err := train.ResolvedYAML(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("printed:\n%s\nwant:\n%s", stdout.Bytes(), want)
	}
	if !bytes.Contains(want, []byte("steps: 3\n")) || !bytes.Contains(want, []byte("kl_coef: 0.001\n")) {
		t.Errorf("flags or preset missing:\n%s", want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--print-defaults created the output directory (%v)", err)
	}
}
