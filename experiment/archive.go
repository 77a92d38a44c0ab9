package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/metrics"
)

// archivedMetrics is the name of a cell's metrics in an archive.
const archivedMetrics = metrics.FileName + ".gz"

// cellMetrics is the path of a cell's metrics: its metrics.jsonl, or its
// archived metrics.jsonl.gz when the plain file is absent (then gzipped is
// true). A cell with neither names the plain file, whose absence the reader
// reports.
func cellMetrics(dir string) (path string, gzipped bool) {
	plain := filepath.Join(dir, metrics.FileName)
	if _, err := os.Stat(plain); errors.Is(err, fs.ErrNotExist) {
		gz := filepath.Join(dir, archivedMetrics)
		if _, err := os.Stat(gz); err == nil {
			return gz, true
		}
	}
	return plain, false
}

// Archive copies what the report needs of every finished cell — its
// done.json, cell.yaml and metrics, gzipped — into dir, laid out like the
// grid's out directory (dir/cells/SETTING/METHOD/seedN/). Checkpoints, final
// weights and TensorBoard files stay behind: an archive of a whole grid is a
// few megabytes, small enough to keep beside the report it backs.
//
// An archive is itself a grid directory: with out set to dir, Collect and
// Report rebuild the report from it, and Run trains only the cells it lacks.
// Archiving a cell again writes the same bytes, so a version-controlled
// archive changes only where cells were added.
func Archive(c *Config, dir string) (int, error) {
	n := 0
	for _, cell := range c.Cells() {
		if !c.Done(cell) {
			continue
		}
		src := c.Dir(cell)
		dst := filepath.Join(dir, "cells", cell.Setting, cell.Method, fmt.Sprintf("seed%d", cell.Seed))
		if filepath.Clean(src) == filepath.Clean(dst) {
			continue // archiving a grid into itself
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return n, fmt.Errorf("experiment: archive: %w", err)
		}
		if err := archiveMetrics(src, dst); err != nil {
			return n, fmt.Errorf("experiment: archive %s: %w", cell.ID(), err)
		}
		// done.json last: an archived cell counts as finished only whole.
		for _, name := range []string{"cell.yaml", "done.json"} {
			data, err := os.ReadFile(filepath.Join(src, name))
			if errors.Is(err, fs.ErrNotExist) && name == "cell.yaml" {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("experiment: archive %s: %w", cell.ID(), err)
			}
			if err := atomicfile.WriteFile(filepath.Join(dst, name), data); err != nil {
				return n, fmt.Errorf("experiment: archive %s: %w", cell.ID(), err)
			}
		}
		n++
	}
	return n, nil
}

// archiveMetrics writes src's metrics gzipped into dst: its metrics.jsonl
// gzipped, or its own archived copy as it is.
func archiveMetrics(src, dst string) error {
	path, gzipped := cellMetrics(src)
	if !gzipped {
		return metrics.WriteGzip(filepath.Join(dst, archivedMetrics), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dst, archivedMetrics), data)
}
