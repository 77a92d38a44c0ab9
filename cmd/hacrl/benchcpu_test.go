package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/kernel"
)

// bench cpu describes the machine, then gives each product on each kernel
// path asked for its rate and its fraction of the peak or the bandwidth.
func TestBenchCPU(t *testing.T) {
	stdout, stderr, code := runHacrl(t, "bench", "cpu", "--paths", "all", "--tall", "24,40,56", "--decode", "48,80",
		"--repeats", "1", "--threads", "2", "--mem-read-mb", "4")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines := jsonObjects(t, stdout)
	machine := lines[0]
	var paths []string
	for _, p := range machine["kernel_paths"].([]any) {
		paths = append(paths, p.(string))
	}
	if !slices.Equal(paths, kernel.Paths()) || machine["default_path"] != kernel.Path() || machine["threads"] != 2.0 {
		t.Errorf("machine line %v: want kernel_paths %v, default_path %s, threads 2", machine, kernel.Paths(), kernel.Path())
	}
	peaks := machine["fma_peak_gflops"].(map[string]any)
	if slices.Contains(paths, "avx2") && !(peaks["avx2-fma"].(float64) > 0) {
		t.Errorf("fma_peak_gflops %v: the avx2 path runs here, so the CPU's AVX2 peak must be measured", peaks)
	}
	if !(machine["mem_read_gb_per_s"].(float64) > 0) {
		t.Errorf("mem_read_gb_per_s = %v, want > 0", machine["mem_read_gb_per_s"])
	}
	kernels := []string{"MatMul", "MatMulBT", "MatMulTAdd", "MatMulBT decode", "MatMulBT decode"}
	if len(lines) != 1+len(paths)*len(kernels) {
		t.Fatalf("%d lines, want the machine and %d per path for %v:\n%s", len(lines), len(kernels), paths, stdout)
	}
	for i, r := range lines[1:] {
		path, name := paths[i/len(kernels)], kernels[i%len(kernels)]
		if r["path"] != path || r["kernel"] != name || !(r["gflops"].(float64) >= 0) || !(r["ms"].(float64) > 0) {
			t.Errorf("line %d = %v, want %s on %s with its time and rate", i+2, r, name, path)
		}
		if name == "MatMulBT decode" && (r["k"] != 48.0 || r["n"] != 80.0 || !(r["weight_gb_per_s"].(float64) > 0)) {
			t.Errorf("line %d = %v, want the --decode 48,80 weight and its read rate", i+2, r)
		}
		if name == "MatMulTAdd" && (r["m"] != 24.0 || r["k"] != 40.0 || r["n"] != 56.0) {
			t.Errorf("line %d = %v, want the --tall 24,40,56 shape", i+2, r)
		}
	}
	if kernel.Path() != machine["default_path"] {
		t.Errorf("bench cpu left the kernels on %s", kernel.Path())
	}
	for _, args := range [][]string{
		{"--tall", "1,2"}, {"--tall", "1,0,3"}, {"--decode", "a,b"}, {"--repeats", "0"}, {"--paths", "avx1024"},
	} {
		_, stderr, code := runHacrl(t, append([]string{"bench", "cpu"}, args...)...)
		if code != 2 || !strings.Contains(stderr, args[0]) {
			t.Errorf("bench cpu %v: exit %d, want 2 naming %s\n%s", args, code, args[0], stderr)
		}
	}
}
