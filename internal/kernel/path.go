package kernel

import (
	"fmt"
	"os"
	"strings"
)

// A kernel path is one implementation of the vector-dispatched kernels: the
// portable Go loops, which every build and CPU runs, or a set of vector
// functions for an instruction set. Builds register the paths they carry
// (kernel_simd.go: "avx2" on amd64 with GOEXPERIMENT=simd;
// kernel_arm64.go: "neon" on arm64); the CPU's cpuid bits say which of
// them can run; the best that can is chosen when the package starts,
// unless the environment variable HACRL_KERNELS names one.
//
// Every path computes the same functions, and each is deterministic on its
// own: the same operands give the same bits run to run, whatever the
// number of cores. Paths may differ from each other in the last bits of
// float32 sums (the vector exp, erf and reductions group their terms their
// own way), within the tolerances the tests hold them to.
type path struct {
	name    string
	runs    bool   // this CPU has the instructions the path needs
	needs   string // what the CPU lacks when it cannot run, for errors
	install func() // sets the kernel function variables to the path's functions
}

// paths lists the registered paths, worst first: the last that runs is the
// default.
var paths = []path{{name: "portable", runs: true, install: installPortable}}

// active is the name of the path in use.
var active = "portable"

// registerPath adds a path to the list; builds call it from package-level
// variable initializers, which run before the init that chooses a path.
func registerPath(p path) bool {
	paths = append(paths, p)
	return true
}

// installPortable clears every vector function variable, so each kernel
// runs its portable loop. Use calls it before a path's install, so that no
// function of another path stays behind.
func installPortable() {
	simdProduct, simdAxpy, simdAdd, simdDot = nil, nil, nil, nil
	simdScores, simdWeightedSum = nil, nil
	simdCausalSoftmax, simdMax, simdScale = nil, nil, nil
	simdGELU, simdGELUBackward, simdSiLUMul, simdSiLUMulBackward, simdExpShift = nil, nil, nil, nil, nil
	simdNormSquares, simdNormScale, simdNormBackward, simdMulAdd, simdSum = nil, nil, nil, nil, nil
	simdAdamW = nil
	simdExpScaled, simdIndexAtLeast, simdFirstAtLeast = nil, nil, nil
	simdWiden, simdBF16Cols = nil, nil
}

// EnvVar is the environment variable that chooses a kernel path for the
// process: "auto" (or unset) for the best this CPU runs, or a name from
// Paths, such as "portable" to run without vector instructions.
const EnvVar = "HACRL_KERNELS"

func init() {
	name := os.Getenv(EnvVar)
	if name == "" {
		name = "auto"
	}
	if err := Use(name); err != nil {
		// Too early for a caller to handle it, and running another path than
		// the one asked for would make benchmarks and tests lie.
		fmt.Fprintf(os.Stderr, "%s=%s: %v\n", EnvVar, name, err)
		os.Exit(2)
	}
}

// Path names the kernel path in use: "avx2" (AVX2 and FMA vector code, on
// amd64 builds with GOEXPERIMENT=simd and a CPU that has both), "neon"
// (arm64 builds, every arm64 CPU) or "portable" (plain Go).
func Path() string { return active }

// Paths lists the kernel paths this build carries that this CPU can run,
// the default last.
func Paths() []string {
	var names []string
	for _, p := range paths {
		if p.runs {
			names = append(names, p.name)
		}
	}
	return names
}

// Use switches the process to the named kernel path ("auto": the best this
// CPU runs). It is for the start of a process, a benchmark or a test: no
// kernel may be running while it switches, and weights packed under one
// path (Pack, PackT) work under another but keep the first one's layout.
func Use(name string) error {
	if name == "auto" {
		for i := len(paths) - 1; i >= 0; i-- {
			if paths[i].runs {
				name = paths[i].name
				break
			}
		}
	}
	known := []string{"auto"}
	for _, p := range paths {
		if p.name != name {
			known = append(known, p.name)
			continue
		}
		if !p.runs {
			return fmt.Errorf("kernel path %q needs %s, which this CPU lacks (it runs: auto, %s)", name, p.needs, strings.Join(Paths(), ", "))
		}
		installPortable()
		p.install()
		active = name
		return nil
	}
	return fmt.Errorf("no kernel path %q in this build (want one of: %s)", name, strings.Join(known, ", "))
}
