package checksum

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/model"
)

// BenchmarkQwen3Checksums measures what the manifest costs on a
// full-size random stand-in of Qwen3-0.6B (bfloat16, about 1.2 GB of
// weights in the published layout): Write right after the weights were
// written (as a checkpoint does, the files in the page cache), Verify, and
// for comparison model.Load of the same directory. Run it with
//
//	GOEXPERIMENT=simd go test -run '^$' -bench Qwen3Checksums -benchtime 3x ./internal/checksum/
func BenchmarkQwen3Checksums(b *testing.B) {
	be, err := backend.New(backend.Choose(""))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "qwen3")
	if err := hfstandin.Write(be, dir, npmtest.Model(npmtest.Dir(b), "qwen3"), hfstandin.Spec{Model: hfstandin.Qwen3_0_6B, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	var size int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if info, e := d.Info(); e == nil && !d.IsDir() {
			size += info.Size()
		}
		return err
	})
	rate := func(b *testing.B, d time.Duration) {
		b.ReportMetric(float64(size)/1e9/(d.Seconds()/float64(b.N)), "GB/s")
		b.ReportMetric(float64(size)/1e9, "GB")
	}
	b.Run("Write", func(b *testing.B) {
		t0 := time.Now()
		for range b.N {
			if err := Write(dir); err != nil {
				b.Fatal(err)
			}
		}
		rate(b, time.Since(t0))
	})
	b.Run("Verify", func(b *testing.B) {
		t0 := time.Now()
		for range b.N {
			if found, err := Verify(dir); !found || err != nil {
				b.Fatal(found, err)
			}
		}
		rate(b, time.Since(t0))
	})
	var m *model.Model
	b.Run("model.Load", func(b *testing.B) {
		t0 := time.Now()
		for range b.N {
			if m, err = model.Load(be, dir); err != nil {
				b.Fatal(err)
			}
		}
		rate(b, time.Since(t0))
	})
	// A training checkpoint of the same model: exact float32 weights and
	// the AdamW state (2.4 + 4.8 GB), written then hashed, as
	// train's checkpoint does.
	tr, err := model.NewTrainer(m, model.OptimizerConfig{LearningRate: 1e-5})
	if err != nil {
		b.Fatal(err)
	}
	ck := filepath.Join(b.TempDir(), "checkpoint")
	b.Run("checkpoint", func(b *testing.B) {
		var save, sum time.Duration
		for range b.N {
			t0 := time.Now()
			if err := m.SaveWith(ck, model.SaveOptions{Exact: true}); err != nil {
				b.Fatal(err)
			}
			if err := tr.SaveState(ck); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := Write(ck); err != nil {
				b.Fatal(err)
			}
			save, sum = save+t1.Sub(t0), sum+time.Since(t1)
		}
		b.ReportMetric(save.Seconds()/float64(b.N), "s-save")
		b.ReportMetric(sum.Seconds()/float64(b.N), "s-checksums")
	})
}
