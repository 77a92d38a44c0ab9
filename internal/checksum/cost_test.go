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
	b.Run("model.Load", func(b *testing.B) {
		t0 := time.Now()
		for range b.N {
			if _, err := model.Load(be, dir); err != nil {
				b.Fatal(err)
			}
		}
		rate(b, time.Since(t0))
	})
}
