package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// XLAPluginEnv names the environment variable that names the PJRT plugin file
// the XLA backend loads (hacrl's --xla-plugin flag sets it), before any search.
const XLAPluginEnv = "HACRL_XLA_PLUGIN"

// A pluginPlace is one file FindXLAPlugin looks at, and why.
type pluginPlace struct {
	path, from string
}

// FindXLAPlugin returns the PJRT plugin file for platform "cuda" or "cpu"
// (or "" for either, CUDA first). It never downloads anything: it takes the
// file XLAPluginEnv names, or else the first that exists of
//
//   - cuda: the xla_cuda_plugin.so of pip's jax-cuda13-pjrt, then
//     jax-cuda12-pjrt (<site-packages>/jax_plugins/xla_cuda13/…), in the
//     Python environments listed below; then go-xla's
//     pjrt_c_api_cuda_plugin.so in the directories of
//     PJRT_PLUGIN_LIBRARY_PATH, ~/.local/lib/go-xla and /usr/local/lib/go-xla;
//   - cpu: the pjrt_c_api_cpu_plugin.so of pip's lammps-jax-pjrt-cpu in those
//     Python environments, then where scripts/xla-cpu-plugin.sh installs it
//     (~/.cache/hacrl/xla), then go-xla's directories as above.
//
// The Python environments are $VIRTUAL_ENV, $CONDA_PREFIX, the prefix of each
// python3 on $PATH, the package directories the first python3 on $PATH
// reports (site.getsitepackages: pyenv, uv and conda interpreters), ~/.local,
// /usr/local, /usr and /opt/conda, each prefix's lib/python3*/site-packages
// and dist-packages. When nothing is found the error lists every place
// looked at and how to get a plugin.
func FindXLAPlugin(platform string) (string, error) {
	if p := os.Getenv(XLAPluginEnv); p != "" {
		return explicitPlugin(p, "$"+XLAPluginEnv)
	}
	var platforms []string
	switch platform {
	case "cuda", "cpu":
		platforms = []string{platform}
	case "":
		platforms = []string{"cuda", "cpu"}
	default:
		return "", fmt.Errorf("XLA platform %q: hacrl finds plugins for cuda and cpu; name another plugin's file with --xla-plugin or $%s", platform, XLAPluginEnv)
	}
	sites := sitePackages() // asks python3 once for every platform
	var looked []pluginPlace
	for _, p := range platforms {
		looked = append(looked, pluginPlaces(p, sites)...)
	}
	for _, pl := range looked {
		if fi, err := os.Stat(pl.path); err == nil && fi.Mode().IsRegular() {
			return pl.path, nil
		}
	}
	return "", &noPluginError{platform: platform, looked: looked}
}

// explicitPlugin checks a plugin file named by the user and makes its path
// absolute (go-xla searches its own directories for a relative name).
func explicitPlugin(p, from string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", from, p, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s names PJRT plugin %s: %w", from, p, err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s names %s, which is not a file (want a PJRT plugin .so)", from, p)
	}
	return abs, nil
}

// noPluginError is FindXLAPlugin's error when no plugin file exists.
type noPluginError struct {
	platform string
	looked   []pluginPlace
}

func (e *noPluginError) Error() string {
	var b strings.Builder
	what := e.platform
	if what == "" {
		what = "cuda or cpu"
	}
	fmt.Fprintf(&b, "no XLA PJRT plugin for %s found (hacrl never downloads one); looked at $%s (unset) and:\n", what, XLAPluginEnv)
	for _, pl := range e.looked {
		fmt.Fprintf(&b, "  %s  (%s)\n", pl.path, pl.from)
	}
	if e.platform != "cpu" {
		b.WriteString("For GPUs: pip install jax-cuda13-pjrt (CUDA 13; jax-cuda12-pjrt for CUDA 12) into one of those Python environments,\n" +
			"or, on a machine without the package index, `pip download jax-cuda13-pjrt` on one that has it, copy the wheels over and pip install them.\n")
	}
	if e.platform != "cuda" {
		b.WriteString("For the CPU: scripts/xla-cpu-plugin.sh installs one (the pinned PyPI wheel lammps-jax-pjrt-cpu) into ~/.cache/hacrl/xla.\n")
	}
	fmt.Fprintf(&b, "Or name the plugin file with --xla-plugin or $%s.", XLAPluginEnv)
	return b.String()
}

// pluginPlaces lists the files FindXLAPlugin looks at for platform, in
// order, given the Python package directories sites.
func pluginPlaces(platform string, sites []string) []pluginPlace {
	var out []pluginPlace
	add := func(path, from string) {
		if !slices.ContainsFunc(out, func(p pluginPlace) bool { return p.path == path }) {
			out = append(out, pluginPlace{path, from})
		}
	}
	switch platform {
	case "cuda":
		for _, v := range []string{"13", "12"} {
			for _, s := range sites {
				add(filepath.Join(s, "jax_plugins", "xla_cuda"+v, "xla_cuda_plugin.so"), "pip jax-cuda"+v+"-pjrt")
			}
		}
	case "cpu":
		for _, s := range sites {
			add(filepath.Join(s, "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"), "pip lammps-jax-pjrt-cpu")
		}
		if dir, err := cpuPluginCache(); err == nil {
			matches, _ := filepath.Glob(filepath.Join(dir, "*", "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"))
			slices.Sort(matches)
			slices.Reverse(matches) // the newest version first
			for _, m := range matches {
				add(m, "scripts/xla-cpu-plugin.sh")
			}
			if len(matches) == 0 {
				add(filepath.Join(dir, "<version>", "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"), "scripts/xla-cpu-plugin.sh")
			}
		}
	}
	for _, d := range goXLADirs() {
		add(filepath.Join(d, "pjrt_c_api_"+platform+"_plugin.so"), "go-xla's plugin directory")
	}
	return out
}

// cpuPluginCache is the directory scripts/xla-cpu-plugin.sh installs the CPU
// plugin under: $XDG_CACHE_HOME/hacrl/xla, or ~/.cache/hacrl/xla.
func cpuPluginCache() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "hacrl", "xla"), nil
}

// goXLADirs are the directories go-xla installs plugins into and searches:
// $PJRT_PLUGIN_LIBRARY_PATH's, else ~/.local/lib/go-xla and /usr/local/lib/go-xla.
func goXLADirs() []string {
	if p := os.Getenv("PJRT_PLUGIN_LIBRARY_PATH"); p != "" {
		return filepath.SplitList(p)
	}
	var dirs []string
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", "lib", "go-xla"))
	}
	return append(dirs, "/usr/local/lib/go-xla")
}

// sitePackages lists the Python package directories that exist, in search
// order: $VIRTUAL_ENV, $CONDA_PREFIX, each python3 on $PATH (a virtual
// environment's bin/ included), what python3 reports, ~/.local, /usr/local,
// /usr, /opt/conda; a directory reached twice through links is listed once.
func sitePackages() []string {
	var prefixes []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "python3")); err == nil {
			prefixes = append(prefixes, filepath.Dir(filepath.Clean(dir)))
		}
	}
	var defaults []string
	if home, err := os.UserHomeDir(); err == nil {
		defaults = append(defaults, filepath.Join(home, ".local"))
	}
	defaults = append(defaults, "/usr/local", "/usr", "/opt/conda")

	var sites, seen []string
	add := func(dir string) {
		real, err := filepath.EvalSymlinks(dir) // /lib is often /usr/lib
		if err != nil || slices.Contains(seen, real) {
			return
		}
		if fi, err := os.Stat(real); err == nil && fi.IsDir() {
			sites, seen = append(sites, dir), append(seen, real)
		}
	}
	glob := func(p string) {
		for _, pattern := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			matches, _ := filepath.Glob(filepath.Join(p, pattern))
			slices.Sort(matches)
			slices.Reverse(matches) // python3.12 before python3.11
			for _, m := range matches {
				add(m)
			}
		}
	}
	for _, p := range prefixes {
		glob(p)
	}
	for _, d := range pythonSites() {
		add(d)
	}
	for _, p := range defaults {
		glob(p)
	}
	return sites
}

// pythonSites asks the first python3 on $PATH for its package directories,
// which a shim (pyenv) or an unusual layout hides from sitePackages' globs.
// It gives nothing if there is no python3 or it does not answer in 10 s.
func pythonSites() []string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-I", "-c",
		"import site, sysconfig; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()['purelib']]))").Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); filepath.IsAbs(line) {
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// xlaPlugin splits an "xla" backend config's options ("cuda", "cpu,opt=v",
// "/path/plugin.so", …) into the plugin file to load and go-xla's options.
// Platform names are resolved with FindXLAPlugin; other names (a path, or
// a name go-xla knows such as "tpu") are passed on as given, made absolute
// when they name a file.
func xlaPlugin(opts string) (xlaSpec, error) {
	name, rest, _ := strings.Cut(opts, ",")
	s := xlaSpec{plugin: name, rest: rest}
	var err error
	switch {
	case name == "" || name == "cuda" || name == "cpu":
		s.platform = name
		s.plugin, err = FindXLAPlugin(name)
	case strings.ContainsRune(name, os.PathSeparator) || strings.HasSuffix(name, ".so"):
		s.plugin, err = explicitPlugin(name, "backend config xla:"+name)
	}
	return s, err
}

// xlaSpec is an "xla" backend config resolved: the plugin to load, the
// platform asked for ("cuda", "cpu" or "" for any) and go-xla's options.
type xlaSpec struct {
	plugin, platform, rest string
}

// errNoXLA is New's error for an xla config in a binary built without -tags xla.
var errNoXLA = errors.New("this binary was built without XLA; rebuild with -tags xla (scripts/build-xla.sh; see the README's GPU section)")
