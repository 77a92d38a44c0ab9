package rolloutengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// Push implements Syncer. The weights go into a new directory, complete
// and synced before the server hears of it, and the versions before it are
// removed once the server has loaded it:
//
//   - sglang, hacrl: WeightsDir/v<version>, then POST
//     /update_weights_from_disk {"model_path", "weight_version"}, whose
//     answer must say {"success": true};
//   - vllm: <WeightsDir>.v<version> beside WeightsDir, a symbolic link the
//     server was started from, swapped atomically to point at it; then
//     POST /collective_rpc {"method": "reload_weights"} (the server needs
//     VLLM_SERVER_DEV_MODE=1) and POST /reset_prefix_cache.
//
// On error the server may still sample with the previous version; Sample
// then finds responses stale.
func (c *Client) Push(ctx context.Context, version string, save func(dir string) error) error {
	if version == "" || strings.ContainsAny(version, `/\`) {
		return fmt.Errorf("%s: push: weight version %q, want a non-empty name without / or \\", c.where(), version)
	}
	var err error
	if c.cfg.Dialect == VLLM {
		err = c.pushVLLM(ctx, version, save)
	} else {
		err = c.pushFromDisk(ctx, version, save)
	}
	if err != nil {
		return fmt.Errorf("%s: pushing weight version %s: %w", c.where(), version, err)
	}
	c.setVersion(version)
	return nil
}

// pushFromDisk is Push for SGLang and hacrl serve.
func (c *Client) pushFromDisk(ctx context.Context, version string, save func(dir string) error) error {
	root, err := filepath.Abs(c.cfg.WeightsDir)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "v"+version)
	if err := atomicfile.WriteDir(dir, save); err != nil {
		return err
	}
	data, err := c.post(ctx, "/update_weights_from_disk", map[string]string{"model_path": dir, "weight_version": version})
	if err != nil {
		return err
	}
	var reply struct {
		Success *bool  `json:"success"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return fmt.Errorf("/update_weights_from_disk: not a JSON answer: %w", err)
	}
	if reply.Success == nil {
		return errors.New("/update_weights_from_disk: the answer has no success field")
	}
	if !*reply.Success {
		return fmt.Errorf("/update_weights_from_disk: the server did not load %s: %s", dir, reply.Message)
	}
	return removeOthers(root, "v", filepath.Base(dir))
}

// pushVLLM is Push for vLLM, which reloads from the path it started with.
func (c *Client) pushVLLM(ctx context.Context, version string, save func(dir string) error) error {
	link, err := filepath.Abs(c.cfg.WeightsDir)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(link); err != nil {
		return fmt.Errorf("rollout.weights_dir %s: %w (for vllm it must be the model path the server was started with, a symbolic link to its checkpoint)", link, err)
	} else if fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("rollout.weights_dir %s is not a symbolic link: for vllm it must be the model path the server was started with, a link the trainer can swap (ln -s CHECKPOINT %s)", link, link)
	}
	base := filepath.Base(link) + ".v"
	dir := link + ".v" + version
	if err := atomicfile.WriteDir(dir, save); err != nil {
		return err
	}
	tmp := link + ".tmp-link"
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := atomicfile.SyncDir(filepath.Dir(link)); err != nil {
		return err
	}
	if _, err := c.post(ctx, "/collective_rpc", map[string]string{"method": "reload_weights"}); err != nil {
		return err
	}
	if _, err := c.post(ctx, "/reset_prefix_cache", struct{}{}); err != nil {
		return err
	}
	return removeOthers(filepath.Dir(link), base, filepath.Base(dir))
}

// removeOthers removes the entries of parent named prefix+… other than
// keep, and the temporary directories of interrupted pushes.
func removeOthers(parent, prefix, keep string) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		old := strings.HasPrefix(name, prefix) && name != keep && e.IsDir()
		if old || (strings.HasPrefix(name, ".tmp-"+prefix) && e.IsDir()) {
			if err := os.RemoveAll(filepath.Join(parent, name)); err != nil {
				return err
			}
		}
	}
	return nil
}
