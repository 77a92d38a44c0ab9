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

// readCellMetrics reads a cell's metrics.jsonl, or its archived
// metrics.jsonl.gz when the plain file is absent.
func readCellMetrics(dir string) ([]metrics.Record, error) {
	recs, err := metrics.ReadFile(filepath.Join(dir, metrics.FileName))
	if errors.Is(err, fs.ErrNotExist) {
		if _, gzErr := os.Stat(filepath.Join(dir, archivedMetrics)); gzErr == nil {
			return metrics.ReadFile(filepath.Join(dir, archivedMetrics))
		}
	}
	return recs, err
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

// archiveMetrics writes src's metrics gzipped into dst: metrics.jsonl when
// the cell has it, else its own archived copy.
func archiveMetrics(src, dst string) error {
	plain := filepath.Join(src, metrics.FileName)
	if _, err := os.Stat(plain); err == nil {
		return metrics.WriteGzip(filepath.Join(dst, archivedMetrics), plain)
	}
	data, err := os.ReadFile(filepath.Join(src, archivedMetrics))
	if err != nil {
		return fmt.Errorf("no %s or %s: %w", metrics.FileName, archivedMetrics, err)
	}
	return atomicfile.WriteFile(filepath.Join(dst, archivedMetrics), data)
}
