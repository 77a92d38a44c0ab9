//go:build xla

package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/go-xla/compute/xla" // registers "xla"; needs cgo and a PJRT plugin at run time
	"github.com/gomlx/go-xla/pjrt"
)

// XLA reports whether this binary has the XLA backend (built with -tags xla).
const XLA = true

// The PJRT C API version of the header go-xla v0.4.1 is compiled against
// (pjrt/pjrt_c_api.h: PJRT_API_MAJOR, PJRT_API_MINOR; checked by
// TestXLAPJRTHeaderVersion). A plugin of the same major version and a minor
// version at least this one implements every function go-xla calls: the
// API only grows within a major version, and each call passes its struct
// size so a newer plugin reads an older caller's arguments.
const (
	pjrtMajor = 0
	pjrtMinor = 104
)

func init() {
	// go-xla downloads plugins from GitHub and PyPI when none is installed;
	// hacrl never downloads anything at run time.
	xla.EnableAutoInstall(false)
}

// checkXLA loads the plugin of s (once per process) and checks its PJRT C
// API version and its platform.
func checkXLA(s xlaSpec) error {
	if os.Getenv("GOPJRT_CUDA_CHECKS") == "" && jaxLayout(s.plugin) {
		// go-xla warns, when it loads a CUDA plugin, that nvidia/ is not
		// beside the plugin's directory (go-xla's own layout); pip's
		// jax-cuda*-pjrt keeps it two levels up (site-packages/nvidia),
		// where the plugin's RPATH points.
		os.Setenv("GOPJRT_CUDA_CHECKS", "0")
	}
	p, err := pjrt.GetPlugin(s.plugin)
	if err != nil {
		return fmt.Errorf("loading PJRT plugin %s: %w", s.plugin, err)
	}
	return checkPlugin(p, s.platform)
}

// newXLA creates the XLA backend of s, whose plugin checkXLA accepted.
func newXLA(s xlaSpec) (compute.Backend, error) {
	cfg := s.plugin
	if s.rest != "" {
		cfg += "," + s.rest
	}
	if !strings.Contains(s.rest, "tf32") {
		// float32 products in float32, as PyTorch computes them by default
		// (torch.backends.cuda.matmul.allow_tf32 is off); go-xla turns
		// TF32 on for CUDA. "xla:cuda,tf32" asks for it; bfloat16 is
		// compute_dtype's business.
		cfg += ",notf32"
	}
	b, err := xla.New(cfg)
	if err != nil && strings.Contains(err.Error(), "No visible GPU") {
		return nil, fmt.Errorf("%w (the CUDA plugin %s loaded but sees no GPU: check nvidia-smi and $CUDA_VISIBLE_DEVICES, or use xla:cpu)", err, s.plugin)
	}
	return b, err
}

// checkPlugin refuses a plugin whose PJRT C API go-xla cannot use, or whose
// platform is not the one asked for.
func checkPlugin(p *pjrt.Plugin, platform string) error {
	major, minor := p.Version()
	if major != pjrtMajor || minor < pjrtMinor {
		return fmt.Errorf("PJRT plugin %s implements PJRT C API %d.%d; hacrl's go-xla needs %d.%d or a later %d.x",
			p.Path(), major, minor, pjrtMajor, pjrtMinor, pjrtMajor)
	}
	switch {
	case platform == "cuda" && p.IsCPU() && !p.IsCUDA():
		return fmt.Errorf("xla:cuda asked for, but PJRT plugin %s is a CPU plugin", p.Path())
	case platform == "cpu" && p.IsCUDA():
		return fmt.Errorf("xla:cpu asked for, but PJRT plugin %s is a CUDA plugin", p.Path())
	}
	return nil
}

// jaxLayout reports whether path is a plugin of pip's jax-cuda*-pjrt
// (site-packages/jax_plugins/<name>/<plugin>.so).
func jaxLayout(path string) bool {
	return filepath.Base(filepath.Dir(filepath.Dir(path))) == "jax_plugins"
}

// PJRTVersion is the PJRT C API version plugins are checked against.
func PJRTVersion() (major, minor int) { return pjrtMajor, pjrtMinor }
