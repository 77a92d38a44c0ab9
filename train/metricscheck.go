package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hacrl/hacrl/metrics"
)

// metricsPrefix identifies the records of OUT/metrics.jsonl that a
// checkpoint covers (those written before it, which a resume from it
// keeps): a resume finds a record changed since, and names its line.
type metricsPrefix struct {
	Lines  int    `json:"lines"`  // whole lines covered
	Bytes  int64  `json:"bytes"`  // their length
	SHA256 string `json:"sha256"` // of those bytes
	// LineCRC32C is the CRC-32C (Castagnoli) of each line, newline
	// included, 8 hex digits per line, concatenated: it names the line
	// that differs.
	LineCRC32C string `json:"line_crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readMetricsPrefix describes the whole lines of OUT/metrics.jsonl (nil
// when there is none), after flushing the file to stable storage: the
// records a checkpoint covers are on disk before the checkpoint is.
func readMetricsPrefix(out string) (*metricsPrefix, error) {
	path := filepath.Join(out, metrics.FileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1] // whole lines
	p := &metricsPrefix{Bytes: int64(len(data))}
	crcs := make([]byte, 0, 8*bytes.Count(data, []byte("\n")))
	for line := range bytes.Lines(data) {
		crcs = fmt.Appendf(crcs, "%08x", crc32.Checksum(line, castagnoli))
		p.Lines++
	}
	p.LineCRC32C = string(crcs)
	sum := sha256.Sum256(data)
	p.SHA256 = hex.EncodeToString(sum[:])
	return p, nil
}

// checkMetrics refuses to resume from checkpoint l when OUT/metrics.jsonl
// no longer begins with the records l covers, naming the first line that
// differs: the resumed run would keep a changed record as if it were the
// run's.
func (r *Run) checkMetrics(l *loaded) error {
	want := l.st.Metrics
	if want == nil { // a checkpoint written before metrics were recorded
		return nil
	}
	path := filepath.Join(r.cfg.Out, metrics.FileName)
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("resume: %s: the metrics of checkpoint %s: %s; restore the file, or start a new run (another directory, or --overwrite)",
			path, l.dir, fmt.Sprintf(format, args...))
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && want.Lines == 0 {
		return nil
	}
	if err != nil {
		return refuse("%v", err)
	}
	if len(want.LineCRC32C) != 8*want.Lines {
		return refuse("state.json's line_crc32c has %d digits for %d lines", len(want.LineCRC32C), want.Lines)
	}
	n := 0
	for line := range bytes.Lines(data) {
		if n == want.Lines {
			break
		}
		got := fmt.Sprintf("%08x", crc32.Checksum(line, castagnoli))
		if got != want.LineCRC32C[8*n:8*n+8] {
			return refuse("line %d differs from the record the checkpoint covers (CRC-32C %s, want %s): it changed after it was written",
				n+1, got, want.LineCRC32C[8*n:8*n+8])
		}
		n++
	}
	if n < want.Lines || int64(len(data)) < want.Bytes {
		return refuse("the file has %d of the %d lines the checkpoint covers: records from line %d on were lost", n, want.Lines, n+1)
	}
	if sum := sha256.Sum256(data[:want.Bytes]); hex.EncodeToString(sum[:]) != want.SHA256 {
		return refuse("lines 1 to %d differ from the records the checkpoint covers (SHA-256)", want.Lines)
	}
	return nil
}
