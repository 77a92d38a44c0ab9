package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pluginWorld is a machine's Python environments and plugin directories,
// laid out under a temporary directory.
type pluginWorld struct {
	root string
	t    *testing.T
}

// newPluginWorld points HOME, PATH, VIRTUAL_ENV, XDG_CACHE_HOME and go-xla's
// search path into a fresh temporary directory, with python3 on PATH in a
// virtual environment venv/ and ~/.local as further Python prefixes.
func newPluginWorld(t *testing.T) *pluginWorld {
	w := &pluginWorld{root: t.TempDir(), t: t}
	t.Setenv("HOME", w.path("home"))
	t.Setenv("XDG_CACHE_HOME", w.path("home/.cache"))
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", w.path("goxla"))
	t.Setenv(XLAPluginEnv, "")
	t.Setenv("PATH", w.path("venv/bin"))
	w.file("venv/bin/python3")
	for _, d := range []string{"venv/lib/python3.12/site-packages", "home/.local/lib/python3.12/site-packages", "goxla"} {
		if err := os.MkdirAll(w.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *pluginWorld) path(rel string) string { return filepath.Join(w.root, rel) }

// file creates an empty file at rel and returns its path.
func (w *pluginWorld) file(rel string) string {
	p := w.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		w.t.Fatal(err)
	}
	return p
}

func TestFindXLAPlugin(t *testing.T) {
	const (
		venv     = "venv/lib/python3.12/site-packages/"
		local    = "home/.local/lib/python3.12/site-packages/"
		cuda13   = "jax_plugins/xla_cuda13/xla_cuda_plugin.so"
		cuda12   = "jax_plugins/xla_cuda12/xla_cuda_plugin.so"
		lammps   = "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"
		cache    = "home/.cache/hacrl/xla/lammps-jax-pjrt-cpu-0.11.2/" + lammps
		goxla    = "goxla/pjrt_c_api_cuda_plugin.so"
		goxlaCPU = "goxla/pjrt_c_api_cpu_plugin.so"
	)
	tests := []struct {
		name     string
		platform string
		files    []string
		want     string // relative to the world's root
	}{
		{"jax-cuda13-pjrt in the virtualenv", "cuda", []string{venv + cuda13}, venv + cuda13},
		{"jax-cuda12-pjrt", "cuda", []string{local + cuda12}, local + cuda12},
		{"CUDA 13 before CUDA 12", "cuda", []string{venv + cuda12, local + cuda13}, local + cuda13},
		{"the virtualenv before ~/.local", "cuda", []string{local + cuda13, venv + cuda13}, venv + cuda13},
		{"pip before go-xla's directory", "cuda", []string{goxla, venv + cuda13}, venv + cuda13},
		{"go-xla's directory", "cuda", []string{goxla}, goxla},
		{"pip's CPU plugin", "cpu", []string{venv + lammps, cache}, venv + lammps},
		{"scripts/xla-cpu-plugin.sh's cache", "cpu", []string{cache, goxlaCPU}, cache},
		{"cpu never takes a CUDA plugin", "cpu", []string{venv + cuda13, goxlaCPU}, goxlaCPU},
		{"cuda never takes a CPU plugin", "cuda", []string{venv + lammps, cache}, ""},
		{"either: CUDA first", "", []string{cache, venv + cuda13}, venv + cuda13},
		{"either: CPU when no CUDA", "", []string{cache}, cache},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newPluginWorld(t)
			for _, f := range tt.files {
				w.file(f)
			}
			got, err := FindXLAPlugin(tt.platform)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("found %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != w.path(tt.want) {
				t.Errorf("found %s, want %s", got, w.path(tt.want))
			}
		})
	}
}

func TestFindXLAPluginEnv(t *testing.T) {
	w := newPluginWorld(t)
	w.file("venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so")
	named := w.file("elsewhere/my_plugin.so")
	t.Setenv(XLAPluginEnv, named)
	if got, err := FindXLAPlugin("cuda"); err != nil || got != named {
		t.Errorf("FindXLAPlugin = %q, %v; want $%s's %s", got, err, XLAPluginEnv, named)
	}
	t.Setenv(XLAPluginEnv, w.path("elsewhere/missing.so"))
	_, err := FindXLAPlugin("cuda")
	if err == nil || !strings.Contains(err.Error(), XLAPluginEnv) || !strings.Contains(err.Error(), "missing.so") {
		t.Errorf("a missing $%s file: error %v, want one naming the variable and the file", XLAPluginEnv, err)
	}
	t.Setenv(XLAPluginEnv, w.path("elsewhere"))
	if _, err := FindXLAPlugin("cpu"); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("a directory in $%s: error %v, want \"not a file\"", XLAPluginEnv, err)
	}
}

func TestFindXLAPluginNone(t *testing.T) {
	w := newPluginWorld(t)
	for _, tt := range []struct {
		platform string
		want     []string
	}{
		{"cuda", []string{
			w.path("venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so"),
			w.path("home/.local/lib/python3.12/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so"),
			w.path("goxla/pjrt_c_api_cuda_plugin.so"),
			"$" + XLAPluginEnv + " (unset)", "pip install jax-cuda13-pjrt", "pip download", "--xla-plugin",
		}},
		{"cpu", []string{
			w.path("venv/lib/python3.12/site-packages/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"),
			w.path("home/.cache/hacrl/xla"),
			w.path("goxla/pjrt_c_api_cpu_plugin.so"),
			"scripts/xla-cpu-plugin.sh",
		}},
	} {
		_, err := FindXLAPlugin(tt.platform)
		if err == nil {
			t.Fatalf("%s: found a plugin in an empty world", tt.platform)
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error does not mention %q:\n%v", tt.platform, s, err)
			}
		}
	}
	if _, err := FindXLAPlugin("tpu"); err == nil || !strings.Contains(err.Error(), "--xla-plugin") {
		t.Errorf("tpu: error %v, want one pointing to --xla-plugin", err)
	}
}

func TestXLAConfig(t *testing.T) {
	w := newPluginWorld(t)
	cpu := w.file("home/.cache/hacrl/xla/lammps-jax-pjrt-cpu-0.11.2/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so")
	tests := []struct {
		opts                   string
		plugin, platform, rest string
	}{
		{"cpu", cpu, "cpu", ""},
		{"cpu,noshared_buffers", cpu, "cpu", "noshared_buffers"},
		{"", cpu, "", ""},
		{cpu + ",tf32=false", cpu, "", "tf32=false"},
		{"tpu", "tpu", "", ""},
	}
	for _, tt := range tests {
		s, err := xlaPlugin(tt.opts)
		if err != nil || s.plugin != tt.plugin || s.platform != tt.platform || s.rest != tt.rest {
			t.Errorf("xlaPlugin(%q) = %+v, %v; want %q, %q, %q", tt.opts, s, err, tt.plugin, tt.platform, tt.rest)
		}
	}
	if _, err := xlaPlugin("cuda"); err == nil {
		t.Error("xla:cuda with only a CPU plugin: no error")
	}
	if _, err := xlaPlugin(w.path("nowhere/plugin.so")); err == nil || !strings.Contains(err.Error(), "nowhere/plugin.so") {
		t.Errorf("a missing plugin path: error %v, want one naming it", err)
	}
}

// A python3 whose packages sit where no glob looks (a pyenv shim, say) is
// asked where they are.
func TestFindXLAPluginAsksPython(t *testing.T) {
	w := newPluginWorld(t)
	plugin := w.file("odd/place/jax_plugins/xla_cuda13/xla_cuda_plugin.so")
	script := "#!/bin/sh\necho " + w.path("odd/place") + "\n"
	if err := os.WriteFile(w.path("venv/bin/python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w.path("venv/bin/python3"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := FindXLAPlugin("cuda")
	if err != nil || got != plugin {
		t.Errorf("FindXLAPlugin = %q, %v; want %s, where python3 says its packages are", got, err, plugin)
	}
}
