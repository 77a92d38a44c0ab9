package kernel

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// usePath switches the kernels to the named path for the rest of the test.
func usePath(t *testing.T, name string) {
	t.Helper()
	saved := Path()
	if err := Use(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Use(saved); err != nil {
			t.Fatal(err)
		}
	})
}

// Every kernel path this CPU runs passes the kernel tests, not only the
// default one (which runs them at the top level): CI's build also checks
// the portable loops that other machines run.
func TestEveryPath(t *testing.T) {
	tests := map[string]func(*testing.T){
		"MatMul": TestMatMul, "MatMulIndependentOfCores": TestMatMulIndependentOfCores, "MatMulTAdd": TestMatMulTAdd,
		"MatMulBT": TestMatMulBT, "MatMulPacked": TestMatMulPacked, "MatMulBTIndependentOfCores": TestMatMulBTIndependentOfCores,
		"PathsAgreeBitwise": TestMatMulPathsAgreeBitwise, "MatMulSerialMatchesMatMul": TestMatMulSerialMatchesMatMul,
		"DotAxpy": TestDotAxpy, "DotAxpyLengths": TestDotAxpyLengths, "Attention": TestAttention, "GELU": TestGELU,
		"GELUBackward": TestGELUBackward, "SiLUMul": TestSiLUMul, "SiLUMulBackward": TestSiLUMulBackward, "Softmax": TestSoftmax,
		"CausalSoftmax": TestCausalSoftmax, "LogSumExp": TestLogSumExp, "MaxScale": TestMaxScale,
		"NormAndBackward": TestNormAndBackward, "SumMulAdd": TestSumMulAdd, "AdamW": TestAdamW, "Transpose": TestTranspose,
		"ExpScaled": TestExpScaled, "IndexAtLeast": TestIndexAtLeast, "WidenBF16": TestWidenBF16,
		"MatMulBF16MatchesFloat32": TestMatMulBF16MatchesFloat32, "MatMulBF16IndependentOfCores": TestMatMulBF16IndependentOfCores,
	}
	def := Path()
	for _, name := range Paths() {
		if name == def {
			continue
		}
		t.Run(name, func(t *testing.T) {
			usePath(t, name)
			for test, f := range tests {
				t.Run(test, f)
			}
		})
	}
}

// Use installs exactly the path it names, and auto the last one Paths lists.
func TestUse(t *testing.T) {
	usePath(t, "auto")
	runs := Paths()
	if runs[0] != "portable" || Path() != runs[len(runs)-1] {
		t.Fatalf("Paths() = %v, Path() after auto = %q: want portable first and auto the last", runs, Path())
	}
	if err := Use("portable"); err != nil {
		t.Fatal(err)
	}
	if simdProduct != nil || simdExpScaled != nil || simdAdamW != nil || simdNormScale != nil {
		t.Error("portable left vector functions installed")
	}
	if len(runs) > 1 {
		if err := Use(runs[len(runs)-1]); err != nil {
			t.Fatal(err)
		}
		// Every vector path has its products; avx2 has every kernel, neon
		// leaves the others to the portable loops.
		all := simdExpScaled != nil && simdAdamW != nil && simdNormScale != nil
		if simdProduct == nil || simdDot == nil || (Path() == "avx2" && !all) {
			t.Errorf("%s left portable loops in place", Path())
		}
	}
	err := Use("avx1024")
	if err == nil || !strings.Contains(err.Error(), `"avx1024"`) || !strings.Contains(err.Error(), "portable") {
		t.Errorf("Use(avx1024) = %v, want an error naming it and the paths", err)
	}
	if Path() != runs[len(runs)-1] {
		t.Errorf("a refused Use changed the path to %q", Path())
	}
	for _, p := range paths {
		if !p.runs {
			err := Use(p.name)
			if err == nil || !strings.Contains(err.Error(), p.needs) {
				t.Errorf("Use(%s) on a CPU without %s = %v, want an error naming what it lacks", p.name, p.needs, err)
			}
		}
	}
}

// selfCommand runs this test binary again with args. Under qemu-user
// without binfmt_misc (GOARCH=arm64 go test -exec qemu-aarch64, as
// scripts/test.sh runs it) the kernel cannot start an arm64 binary, so the
// command goes through the emulator on PATH.
func selfCommand(args ...string) *exec.Cmd {
	err := exec.Command(os.Args[0], "-test.run=^$").Run()
	if qemu, found := exec.LookPath("qemu-aarch64"); errors.Is(err, syscall.ENOEXEC) && runtime.GOARCH == "arm64" && found == nil {
		return exec.Command(qemu, append([]string{os.Args[0]}, args...)...)
	}
	return exec.Command(os.Args[0], args...)
}

// HACRL_KERNELS chooses the path when the package starts, and a name this
// CPU cannot run stops the process with a message, before any work.
func TestEnvVar(t *testing.T) {
	if os.Getenv("KERNEL_TEST_CHILD") == "1" {
		os.Stdout.WriteString("path=" + Path() + "\n")
		return
	}
	run := func(value string) (string, error) {
		cmd := selfCommand("-test.run=^TestEnvVar$")
		cmd.Env = append(os.Environ(), "KERNEL_TEST_CHILD=1", EnvVar+"="+value)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, name := range append(Paths(), "auto") {
		out, err := run(name)
		want := name
		if name == "auto" {
			want = Paths()[len(Paths())-1]
		}
		if err != nil || !strings.Contains(out, "path="+want+"\n") {
			t.Errorf("%s=%s: %v, output %q: want path=%s", EnvVar, name, err, out, want)
		}
	}
	out, err := run("avx1024")
	if err == nil || !strings.Contains(out, EnvVar+"=avx1024: no kernel path") || strings.Contains(out, "path=") {
		t.Errorf("%s=avx1024: %v, output %q: want exit before the tests, naming the variable", EnvVar, err, out)
	}
	if !slices.Contains(Paths(), "portable") {
		t.Error("the portable path must always run")
	}
}
