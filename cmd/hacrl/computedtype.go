package main

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/pflag"

	"github.com/hacrl/hacrl/model"
)

// computeDTypeFlag is --compute-dtype of the commands that run a model
// (bench engine, eval, generate, score): model.ParseComputeDType's names,
// a bad one or a refusal (bfloat16 where the engine or backend computes in
// float32 only) a usage error naming the flag.
type computeDTypeFlag struct{ name string }

func (c *computeDTypeFlag) register(f *pflag.FlagSet, help string) {
	f.StringVar(&c.name, "compute-dtype", "float32", help)
}

// dtype is the dtype the flag names.
func (c computeDTypeFlag) dtype() (dtypes.DType, error) {
	dt, err := model.ParseComputeDType(c.name)
	if err != nil {
		return 0, usage("--compute-dtype: %v", err)
	}
	return dt, nil
}

// apply sets m's compute dtype to the flag's.
func (c computeDTypeFlag) apply(m *model.Model) error {
	dt, err := c.dtype()
	if err != nil {
		return err
	}
	if err := m.SetComputeDType(dt); err != nil {
		return usage("--compute-dtype: %v", err)
	}
	return nil
}
