package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/safetensors"
)

// loadMemEnv names the checkpoint directory a child test process loads to
// measure its peak memory (see TestMain and measureLoad).
const loadMemEnv = "HACRL_LOAD_MEM_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(loadMemEnv); dir != "" {
		os.Exit(loadMemChild(dir))
	}
	os.Exit(m.Run())
}

// loadMem is what the child reports: its peak resident set before and after
// Load (VmHWM, bytes) and the loaded parameters' float32 size.
type loadMem struct {
	PeakBefore, PeakAfter, Params int64
}

// loadMemChild loads dir and prints a loadMem as JSON.
func loadMemChild(dir string) int {
	b, err := backend.New(backend.Sequential)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	before, err := peakRSS()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := Load(b, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	after, err := peakRSS()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(loadMem{before, after, 4 * m.NumParams()})
	return 0
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func peakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// writeRandomCheckpoint writes a llama checkpoint of cfg with random BF16
// weights (normal, std 0.02) into dir, sharded at shard bytes, one tensor's
// bytes at a time.
func writeRandomCheckpoint(t testing.TB, dir string, cfg Config, shard int64) {
	t.Helper()
	cfg.DType = "bfloat16"
	if err := cfg.WriteJSON(filepath.Join(dir, ConfigFile)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	var entries []safetensors.Entry
	for _, s := range cfg.Normalized().paramSpecs() {
		entries = append(entries, safetensors.Entry{Name: s.name, DType: "BF16", Shape: s.fileShape(), Data: func() ([]byte, error) {
			b := make([]byte, 2*s.size())
			for i := 0; i < len(b); i += 2 {
				binary.LittleEndian.PutUint16(b[i:], safetensors.Float32ToBFloat16(float32(0.02*rng.NormFloat64())))
			}
			return b, nil
		}})
	}
	if _, err := safetensors.WriteSharded(dir, "model", entries, safetensors.ShardOptions{MaxShardSize: shard, Metadata: map[string]string{"format": "pt"}}); err != nil {
		t.Fatal(err)
	}
}

// measureLoad loads dir in a fresh process and returns what it measured.
func measureLoad(t testing.TB, dir string) loadMem {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), loadMemEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child load: %v\n%s", err, out)
	}
	var r loadMem
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return r
}

// TestLoadMemory loads a ~50 MB BF16 sharded checkpoint (100 MB as float32)
// in a fresh process: the peak resident memory the load adds must stay
// within a quarter above the float32 parameters (reading every shard whole
// and converting afterwards needs about 1.5× to 2.5×).
func TestLoadMemory(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Family: "llama", Vocab: 8000, Dim: 512, Layers: 4, Heads: 8, KVHeads: 2, Hidden: 1408, MaxSeq: 64, BOS: -1, EOS: -1}
	writeRandomCheckpoint(t, dir, cfg, 16<<20)
	r := measureLoad(t, dir)
	added := r.PeakAfter - r.PeakBefore
	t.Logf("parameters %.1f MB, peak before load %.1f MB, after %.1f MB: the load added %.1f MB (%.2f× the parameters)",
		mb(r.Params), mb(r.PeakBefore), mb(r.PeakAfter), mb(added), float64(added)/float64(r.Params))
	if limit := r.Params + r.Params/4; added > limit {
		t.Errorf("the load added %.1f MB of peak memory, want at most %.1f MB (1.25× the %.1f MB of parameters)", mb(added), mb(limit), mb(r.Params))
	}
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// BenchmarkLoadPeakMemory loads a ~270 MB BF16 checkpoint in 100 MB shards
// (533 MB as float32) in a fresh process and reports the peak resident
// memory the load added, in MB and as a multiple of the float32 footprint.
func BenchmarkLoadPeakMemory(b *testing.B) {
	dir := b.TempDir()
	cfg := Config{Family: "llama", Vocab: 32000, Dim: 1024, Layers: 6, Heads: 16, KVHeads: 4, Hidden: 2816, MaxSeq: 128, BOS: -1, EOS: -1}
	writeRandomCheckpoint(b, dir, cfg, 100_000_000)
	b.ResetTimer()
	var r loadMem
	for range b.N {
		r = measureLoad(b, dir)
	}
	added := r.PeakAfter - r.PeakBefore
	b.ReportMetric(mb(r.Params), "params-MB")
	b.ReportMetric(mb(r.PeakAfter), "peak-MB")
	b.ReportMetric(mb(added), "added-MB")
	b.ReportMetric(float64(added)/float64(r.Params), "added/params")
}
