package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hacrl/hacrl/internal/kernel"
	"github.com/spf13/cobra"
)

// benchCPUCmd measures what this CPU can do and how much of it the native
// kernels use: the peak rate of fused multiply-adds of each vector
// instruction set, the memory read bandwidth, and each matrix product at a
// training shape and at a decoding shape, on the kernel paths asked for.
func benchCPUCmd() *cobra.Command {
	var (
		paths            string
		tall, decode     string
		threads, repeats int
		memReadMB        int
	)
	cmd := &cobra.Command{
		Use:   "cpu",
		Short: "Measure this CPU's multiply-add peaks and memory bandwidth, and the kernels' fraction of them",
		Long: `Measure this CPU's peaks and how much of them hacrl's native kernels reach.

The first JSON line describes the machine: the kernel paths this build runs
here (the default last; HACRL_KERNELS chooses another), the peak float32
multiply-add rate of each vector instruction set the CPU has (a loop of
independent multiply-adds on registers, on --threads threads at once: the
rate no kernel can beat), and the memory read bandwidth. Then one line per
kernel path (--paths; the one in use by default) and product: the three matrix products of training at
--tall M,K,N (x·w, x·wᵀ with weights held [out,in], and the weight
gradient xᵀ·y summed over M rows), with GFLOP/s and their fraction of the
best peak; and the decoding product x·wᵀ of one row and of 16 rows against
a --decode K,N weight larger than the caches, with the weight bytes read
per second and their fraction of the memory bandwidth. Each figure is the
median of --repeats timed runs after one untimed one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseDims("--tall", tall, 3)
			if err != nil {
				return err
			}
			d, err := parseDims("--decode", decode, 2)
			if err != nil {
				return err
			}
			if threads < 1 || repeats < 1 || memReadMB < 0 {
				return usage("--threads %d, --repeats %d, --mem-read-mb %d: want ≥ 1, ≥ 1 and ≥ 0", threads, repeats, memReadMB)
			}
			run := []string{kernel.Path()}
			switch paths {
			case "":
			case "all":
				run = kernel.Paths()
			default:
				run = strings.Split(paths, ",")
				for _, p := range run {
					if !slices.Contains(kernel.Paths(), p) {
						return usage("--paths: %q is not a kernel path this build runs on this CPU (it runs: %s)", p, strings.Join(kernel.Paths(), ", "))
					}
				}
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
			defer kernel.Use(kernel.Path())

			enc := json.NewEncoder(cmd.OutOrStdout())
			peaks := map[string]float64{}
			best := 0.0
			for _, p := range kernel.MeasurePeaks(threads, 200*time.Millisecond) {
				peaks[p.ISA] = round(p.GFLOPS, 1)
				best = max(best, p.GFLOPS)
			}
			bw := 0.0
			if memReadMB > 0 {
				bw = memReadGBPerS(memReadMB<<20, threads)
			}
			if err := enc.Encode(map[string]any{
				"cpu": cpuModel(), "goarch": runtime.GOARCH, "threads": threads,
				"kernel_paths": kernel.Paths(), "default_path": kernel.Path(),
				"fma_peak_gflops": peaks, "mem_read_gb_per_s": round(bw, 2),
			}); err != nil {
				return err
			}
			for _, p := range run {
				if err := kernel.Use(p); err != nil {
					return err
				}
				for _, r := range productBenchmarks(t[0], t[1], t[2], d[0], d[1], repeats) {
					r["path"] = p
					if g, ok := r["gflops"].(float64); ok && best > 0 {
						r["peak_fraction"] = round(g/best, 3)
					}
					if g, ok := r["weight_gb_per_s"].(float64); ok && bw > 0 {
						r["bandwidth_fraction"] = round(g/bw, 3)
					}
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&paths, "paths", "", "comma-separated kernel paths to measure, or all: every path this CPU runs (default: the path in use)")
	f.StringVar(&tall, "tall", "1024,1024,3072", "M,K,N of the training products (M rows of width K, N outputs)")
	f.StringVar(&decode, "decode", "2048,8192", "K,N of the decoding products' weight (K inputs, N outputs)")
	f.IntVar(&threads, "threads", runtime.NumCPU(), "threads (GOMAXPROCS) for the products and the peaks")
	f.IntVar(&repeats, "repeats", 5, "timed runs per product (the median is reported)")
	f.IntVar(&memReadMB, "mem-read-mb", 512, "MiB summed to measure the memory read bandwidth; 0: skip")
	return cmd
}

// bestPeak is the highest multiply-add peak of this CPU's vector
// instruction sets on threads threads, in GFLOP/s; 0 where it has none.
func bestPeak(threads int) float64 {
	best := 0.0
	for _, p := range kernel.MeasurePeaks(threads, 200*time.Millisecond) {
		best = max(best, p.GFLOPS)
	}
	return best
}

// parseDims parses n comma-separated positive integers.
func parseDims(flag, s string, n int) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, usage("%s %q: want %d comma-separated sizes", flag, s, n)
	}
	dims := make([]int, n)
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 {
			return nil, usage("%s %q: %q is not a positive integer", flag, s, p)
		}
		dims[i] = v
	}
	return dims, nil
}

// productBenchmarks times the training products at m×k·k×n and the
// decoding products against a [dn,dk] weight, on the kernel path in use.
func productBenchmarks(m, k, n, dk, dn, repeats int) []map[string]any {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(size int) []float32 {
		s := make([]float32, size)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	x, w, out := fill(m*k), fill(k*n), make([]float32, m*n)
	flops := 2 * float64(m) * float64(k) * float64(n)
	tallRow := func(name string, f func()) map[string]any {
		s := medianSeconds(f, repeats)
		return map[string]any{"kernel": name, "m": m, "k": k, "n": n, "ms": round(s*1e3, 3), "gflops": round(flops/s/1e9, 1)}
	}
	rows := []map[string]any{
		tallRow("MatMul", func() { kernel.MatMul(out, x, w, nil, m, k, n) }),
		tallRow("MatMulBT", func() { kernel.MatMulBT(out, x, w, nil, m, k, n) }),
		// The weight gradient: x [m,k] and y [m,n] give k×n sums over m rows.
		tallRow("MatMulTAdd", func() { kernel.MatMulTAdd(w, x, out, k, m, n) }),
	}
	wd := fill(dk * dn)
	for _, rowsN := range []int{1, 16} {
		xd, od := fill(rowsN*dk), make([]float32, rowsN*dn)
		s := medianSeconds(func() { kernel.MatMulBT(od, xd, wd, nil, rowsN, dk, dn) }, repeats)
		gbs := 4 * float64(dk) * float64(dn) / s / 1e9
		rows = append(rows, map[string]any{
			"kernel": "MatMulBT decode", "m": rowsN, "k": dk, "n": dn, "ms": round(s*1e3, 3),
			"gflops": round(2*float64(rowsN)*float64(dk)*float64(dn)/s/1e9, 1), "weight_gb_per_s": round(gbs, 2),
		})
	}
	return rows
}

// medianSeconds runs f once untimed, then times it repeats times and
// returns the median.
func medianSeconds(f func(), repeats int) float64 {
	f()
	times := make([]float64, repeats)
	for i := range times {
		start := time.Now()
		f()
		times[i] = time.Since(start).Seconds()
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// cpuModel is the CPU's model name from /proc/cpuinfo, or "" where there is
// none (not Linux, or arm64 kernels that do not name it).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
