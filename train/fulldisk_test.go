package train

import (
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/mounttest"
	"github.com/hacrl/hacrl/metrics"
)

// TestFullDiskLosesNothing runs the same run on file systems too small for
// it (tmpfs mounts from a tenth to nine tenths of the space the whole run
// takes), so that the disk fills up at a different moment each time: in a
// checkpoint, the metrics, the TensorBoard events, the final agents. Each
// time the run stops with an error naming the device as full and a path in
// OUT; the run, copied to storage with room and resumed, ends with the
// uninterrupted run's metrics and byte-identical final agents.
func TestFullDiskLosesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig(t, dir, "hacpo", 3)
	cfg.Rollouts.Every = 1
	ref := *cfg
	ref.Out = filepath.Join(dir, "ref")
	trainWith(t, &ref, Options{})
	want := readDeterministic(t, ref.Out)
	wantFinal := digest(t, filepath.Join(ref.Out, "final"))
	need := pagesUsed(t, ref.Out)

	filled := 0
	for tenth := 1; tenth <= 9; tenth++ {
		small := *cfg
		small.Out = filepath.Join(mounttest.Small(t, need*tenth/10), "run")
		_, err := trainWithErr(t, &small, Options{})
		if err == nil {
			// Checkpoints are pruned as the run goes: at its peak it may
			// need less than it leaves.
			continue
		}
		filled++
		t.Logf("%d/10 of the space: %v", tenth, err)
		if msg := err.Error(); !strings.Contains(msg, "no space left on device") || !strings.Contains(msg, small.Out) {
			t.Errorf("%d/10 of the space: error %q, want one naming a path in %s and the full device", tenth, msg, small.Out)
		}
		moved := *cfg
		moved.Out = filepath.Join(dir, "moved", string(rune('0'+tenth)))
		copyTree(t, small.Out, moved.Out)
		if _, err := trainWithErr(t, &moved, Options{Resume: true}); err != nil {
			t.Fatalf("%d/10 of the space: resumed with room: %v", tenth, err)
		}
		if got := readDeterministic(t, moved.Out); !reflect.DeepEqual(got, want) {
			t.Errorf("%d/10 of the space: metrics after resuming differ from the uninterrupted run's", tenth)
		}
		if got := digest(t, filepath.Join(moved.Out, "final")); !reflect.DeepEqual(got, wantFinal) {
			t.Errorf("%d/10 of the space: final agents differ from the uninterrupted run's", tenth)
		}
	}
	if filled < 6 {
		t.Errorf("the disk filled up in %d of 9 runs, want most", filled)
	}
}

func readDeterministic(t *testing.T, out string) []metrics.Record {
	t.Helper()
	recs, err := metrics.ReadFile(filepath.Join(out, metrics.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return deterministic(recs)
}

// pagesUsed is the space the files under dir take on a tmpfs: whole 4 KiB
// pages, and one for each directory.
func pagesUsed(t *testing.T, dir string) int {
	t.Helper()
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += int(fi.Size()+4095) / 4096 * 4096
		if d.IsDir() {
			total += 4096
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
