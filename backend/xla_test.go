//go:build xla

package backend_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/go-xla/pjrt"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/xlatest"
)

// TestPJRTHeaderVersion holds the PJRT C API version New checks plugins
// against to the header go-xla is compiled with.
func TestXLAPJRTHeaderVersion(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/go-xla").Output()
	if err != nil {
		t.Fatalf("go list go-xla: %v", err)
	}
	header, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pjrt", "pjrt_c_api.h"))
	if err != nil {
		t.Fatal(err)
	}
	define := func(name string) int {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindSubmatch(header)
		if m == nil {
			t.Fatalf("pjrt_c_api.h has no #define %s", name)
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	major, minor := backend.PJRTVersion()
	if hm, hn := define("PJRT_API_MAJOR"), define("PJRT_API_MINOR"); hm != major || hn != minor {
		t.Errorf("backend checks plugins against PJRT C API %d.%d; go-xla's header is %d.%d", major, minor, hm, hn)
	}
}

// TestXLACPU runs a graph on XLA's CPU plugin and checks the plugin's version.
func TestXLACPU(t *testing.T) {
	plugin := xlatest.Plugin(t)
	p, err := pjrt.GetPlugin(plugin)
	if err != nil {
		t.Fatal(err)
	}
	major, minor := p.Version()
	wantMajor, wantMinor := backend.PJRTVersion()
	if major != wantMajor || minor < wantMinor {
		t.Errorf("CPU plugin %s: PJRT C API %d.%d, want %d.%d or later", plugin, major, minor, wantMajor, wantMinor)
	}
	t.Logf("%s: PJRT C API %d.%d", plugin, major, minor)
	b := xlatest.Backend(t)
	if !strings.Contains(b.Name(), "xla") {
		t.Fatalf("backend %s, want xla", b.Name())
	}
	got := MustExecOnce(b, func(x *Node) *Node { return ReduceAllSum(Mul(x, x)) }, []float32{1, 2, 3})
	if v := tensors.ToScalar[float32](got); v != 14 {
		t.Errorf("Σx² on xla:cpu = %v, want 14", v)
	}
}

// TestXLANoDownload: with no plugin on the machine, xla:cuda and xla:cpu fail
// with the places looked at, and nothing is downloaded or written (go-xla's
// auto-install would fetch a plugin into ~/.local/lib/go-xla).
func TestXLANoDownload(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("PATH", filepath.Join(home, "bin"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	t.Setenv(backend.XLAPluginEnv, "")
	for _, cfg := range []string{"xla:cuda", "xla:cpu", "xla"} {
		_, err := backend.New(cfg)
		if err == nil {
			t.Fatalf("New(%q) succeeded with no plugin on the machine", cfg)
		}
		for _, want := range []string{"never downloads", filepath.Join(home, ".local", "lib", "go-xla")} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("New(%q): error does not mention %q:\n%v", cfg, want, err)
			}
		}
	}
	entries, err := os.ReadDir(home)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("New wrote %s into $HOME", e.Name())
	}
}

// TestXLAPlatformMismatch: a CPU plugin named for xla:cuda is refused.
func TestXLAPlatformMismatch(t *testing.T) {
	t.Setenv(backend.XLAPluginEnv, xlatest.Plugin(t))
	_, err := backend.New("xla:cuda")
	if err == nil || !strings.Contains(err.Error(), "CPU plugin") {
		t.Errorf("xla:cuda with a CPU plugin: error %v, want a refusal", err)
	}
}
