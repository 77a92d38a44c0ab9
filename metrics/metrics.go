// Package metrics records training metrics: one JSON object per line in
// OUT/metrics.jsonl and, optionally, TensorBoard event files in
// OUT/tb/<agent>/ (OUT/tb/run/ for run-wide records).
//
// Each JSONL line holds "step" (int), "agent" (string, "" for run-wide
// records), "time" (unix seconds) and then the record's flat metric keys, such
// as "reward/mean" or "eval/test/greedy_acc", in sorted order. JSON has no NaN
// or infinity: such values are written as null and read back as NaN.
//
// A run resumed from a checkpoint at step S reopens the directory with
// resumeStep S: records after S are dropped, so that the resumed run ends with
// the same file as an uninterrupted one apart from the times.
//
// The file never ends in part of a record because of a failed write: a
// record is one write, and a write that fails (a full disk) is cut back off
// the file before Write returns its error. Only a crash of the machine in
// the middle of a write can leave a torn last line; ReadFile skips it and
// says so (TornError), and Open drops it on resume.
package metrics

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// FileName is the name of the JSONL metrics file inside an output directory.
const FileName = "metrics.jsonl"

// Fresh is the resumeStep of a run that starts from scratch. A run that
// starts at step 0 writes its step-0 records (evaluations before training)
// again, so resuming at step 0 is the same as starting fresh.
const Fresh = 0

// Record is the metrics of one agent (or of the whole run when Agent is "")
// at one step.
type Record struct {
	Step   int
	Agent  string
	Time   float64 // unix seconds; Write fills in the current time when zero
	Values map[string]float64
}

// reserved are the JSON keys of a line that are not metric values.
var reserved = map[string]bool{"step": true, "agent": true, "time": true}

// Option configures a Writer.
type Option func(*config)

type config struct {
	tensorBoard bool
	host        string
	sink        Sink
}

// Sink receives each record once Write has added it to the JSONL file: an
// experiment tracker (package tracking/mlflow). Record must return at once
// and must not keep rec.Values, which the caller may reuse.
type Sink interface {
	Record(rec Record)
}

// WithSink passes every record written on to s.
func WithSink(s Sink) Option {
	return func(c *config) { c.sink = s }
}

// WithTensorBoard turns the TensorBoard event files on (the default) or off.
func WithTensorBoard(enabled bool) Option {
	return func(c *config) { c.tensorBoard = enabled }
}

// WithHost sets the host name in event file names (default os.Hostname).
func WithHost(host string) Option {
	return func(c *config) { c.host = host }
}

// Writer appends records to an output directory's metrics files. It is safe
// for concurrent use.
type Writer struct {
	mu     sync.Mutex
	dir    string
	jsonl  *os.File
	size   int64 // of the JSONL file after the last whole record
	line   []byte
	cfg    config
	events map[string]*eventWriter // by TensorBoard run directory name
	closed bool
}

// Open prepares dir for writing metrics and returns a Writer appending to
// dir/metrics.jsonl. resumeStep is the number of steps already done. With
// resumeStep ≤ 0 (Fresh) existing metrics are discarded: the JSONL file is
// emptied and this package's event files under dir/tb are removed. With
// resumeStep > 0 only records and events with step ≤ resumeStep are kept; the
// files are rewritten atomically. An incomplete last line or event, as a crash
// while writing leaves, is dropped.
func Open(dir string, resumeStep int, opts ...Option) (*Writer, error) {
	cfg := config{tensorBoard: true}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		cfg.host = h
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := truncateJSONL(path, resumeStep); err != nil {
		return nil, err
	}
	if err := truncateEvents(filepath.Join(dir, "tb"), resumeStep); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &Writer{dir: dir, jsonl: f, size: fi.Size(), cfg: cfg, events: map[string]*eventWriter{}}, nil
}

// Write appends rec as one line of the JSONL file and, when TensorBoard is on,
// as one event of its agent's event file.
func (w *Writer) Write(rec Record) error {
	if rec.Step < 0 {
		return fmt.Errorf("metrics: record of agent %q: step %d is negative", rec.Agent, rec.Step)
	}
	for k := range rec.Values {
		if k == "" || reserved[k] || !utf8.ValidString(k) {
			return fmt.Errorf("metrics: record of agent %q at step %d: invalid metric key %q (want non-empty UTF-8, not step, agent or time)", rec.Agent, rec.Step, k)
		}
	}
	if rec.Time == 0 {
		rec.Time = float64(time.Now().UnixNano()) / 1e9
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("metrics: write on a closed Writer")
	}
	w.line = appendLine(w.line[:0], rec)
	if _, err := w.jsonl.Write(w.line); err != nil {
		// Whatever part of the line reached the file comes off again, so
		// that the file still ends with a whole record.
		if terr := w.jsonl.Truncate(w.size); terr != nil {
			return fmt.Errorf("metrics: %w (and cutting the partial record off %s: %v)", err, w.jsonl.Name(), terr)
		}
		return fmt.Errorf("metrics: %w", err)
	}
	w.size += int64(len(w.line))
	if w.cfg.sink != nil {
		w.cfg.sink.Record(rec)
	}
	if !w.cfg.tensorBoard || len(rec.Values) == 0 {
		return nil
	}
	ew, err := w.eventFile(rec)
	if err != nil {
		return err
	}
	e := Event{WallTime: rec.Time, Step: int64(rec.Step)}
	for _, k := range SortedKeys(rec.Values) {
		e.Values = append(e.Values, Value{Tag: k, SimpleValue: float32(rec.Values[k])})
	}
	return ew.write(e)
}

// eventFile returns the open event file of rec's agent, creating it on first
// use. A name already taken (a resumed run within the same second) gets a
// numeric suffix.
func (w *Writer) eventFile(rec Record) (*eventWriter, error) {
	run := TensorBoardRun(rec.Agent)
	if ew := w.events[run]; ew != nil {
		return ew, nil
	}
	dir := filepath.Join(w.dir, "tb", run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s%d.%s", eventFilePrefix, int64(rec.Time), w.cfg.host))
	path := base
	for i := 1; ; i++ {
		ew, err := createEventFile(path, rec.Time)
		if err == nil {
			w.events[run] = ew
			return ew, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return nil, err
		}
		path = fmt.Sprintf("%s.%d", base, i)
	}
}

const eventFilePrefix = "events.out.tfevents."

// TensorBoardRun returns the directory name under OUT/tb of an agent's event
// files: "run" for run-wide records, otherwise the agent name with every
// character outside [A-Za-z0-9._-] replaced by '_'.
func TensorBoardRun(agent string) string {
	if agent == "" {
		return "run"
	}
	s := []byte(agent)
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			s[i] = '_'
		}
	}
	if string(s) == "." || string(s) == ".." {
		return "_"
	}
	return string(s)
}

// Close flushes the files to disk and closes them.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.jsonl.Sync()
	if cerr := w.jsonl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		err = fmt.Errorf("metrics: %w", err)
	}
	for _, run := range slices.Sorted(maps.Keys(w.events)) {
		if cerr := w.events[run].close(); err == nil {
			err = cerr
		}
	}
	return err
}

// SortedKeys returns the keys of values in sorted order.
func SortedKeys(values map[string]float64) []string {
	return slices.Sorted(maps.Keys(values))
}

// appendLine appends rec's JSON line, with its newline.
func appendLine(b []byte, rec Record) []byte {
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(rec.Step), 10)
	b = append(b, `,"agent":`...)
	b = appendString(b, rec.Agent)
	b = append(b, `,"time":`...)
	b = appendFloat(b, rec.Time)
	for _, k := range SortedKeys(rec.Values) {
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		b = appendFloat(b, rec.Values[k])
	}
	return append(b, "}\n"...)
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendFloat appends v as a JSON number, shortest round-trip form, or null
// for NaN and ±Inf.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// IsTiming reports whether key measures the machine rather than the run
// (time/…, tokens_per_s…): the keys in which two runs of the same config
// and seed may differ.
func IsTiming(key string) bool {
	return strings.HasPrefix(key, "time/") || strings.HasPrefix(key, "tokens_per_s")
}

// WithoutTiming returns copies of recs without their timing keys (IsTiming)
// and record times: what equals, bit for bit, between runs of the same
// config and seed.
func WithoutTiming(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		v := make(map[string]float64, len(r.Values))
		for k, x := range r.Values {
			if !IsTiming(k) {
				v[k] = x
			}
		}
		out[i] = Record{Step: r.Step, Agent: r.Agent, Values: v}
	}
	return out
}

// WriteFile writes recs as a JSONL metrics file at path, atomically (a
// reader sees the old file or the new one), without TensorBoard files.
func WriteFile(path string, recs []Record) error {
	var b []byte
	for _, r := range recs {
		b = appendLine(b, r)
	}
	if err := atomicfile.WriteFile(path, b); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// ReadFile reads every record of a JSONL metrics file, plain or gzipped
// (told apart by gzip's magic bytes, so an archived metrics.jsonl.gz reads
// like the file it holds). A null value reads as NaN. Errors name the line at
// fault.
//
// A last line without its newline that is not JSON — what a crash
// in the middle of a write leaves — is not an error of the file: ReadFile
// returns the records before it together with a *TornError, which a reader
// reports and goes on (see Torn).
func ReadFile(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if bytes.HasPrefix(data, gzipMagic) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", path, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", path, err)
		}
	}
	var recs []Record
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, err := parseLine(line)
		if err != nil && isTorn(lines, i) {
			return recs, &TornError{Path: path, Line: i + 1, Bytes: len(line)}
		}
		if err != nil {
			return nil, fmt.Errorf("metrics: %s:%d: %w", path, i+1, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// isTorn reports whether lines[i] is part of a record cut short: the last
// line, without its newline, and not JSON (every prefix of a record's JSON
// object is invalid JSON).
func isTorn(lines [][]byte, i int) bool {
	return i == len(lines)-1 && !bytes.HasSuffix(lines[i], []byte("\n")) && !json.Valid(lines[i])
}

// A TornError reports a metrics file whose last line is part of a record,
// left by a crash in the middle of a write. The records before it are whole.
type TornError struct {
	Path  string
	Line  int // 1-based
	Bytes int // the torn line's length
}

func (e *TornError) Error() string {
	return fmt.Sprintf("metrics: %s:%d: the last line (%d bytes, no newline) is part of a record, as a crash while writing leaves; it is skipped", e.Path, e.Line, e.Bytes)
}

// Torn splits ReadFile's error: it returns the *TornError if err is one
// (the records read are whole and usable), and nil otherwise.
func Torn(err error) *TornError {
	var t *TornError
	if errors.As(err, &t) {
		return t
	}
	return nil
}

// gzipMagic starts every gzip stream (RFC 1952); a JSONL file starts with '{'.
var gzipMagic = []byte{0x1f, 0x8b}

// WriteGzip writes the JSONL metrics file src gzipped at dst, atomically and
// byte for byte the same for the same input (no name or time in the gzip
// header), so that an archive of a run's metrics changes only when they do.
func WriteGzip(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(dst, b.Bytes()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// ParseLine decodes one line of a JSONL metrics file (with or without its
// newline) as ReadFile does: a null value reads as NaN. Readers that tail a
// file a run is still writing (package view) parse its lines one by one.
func ParseLine(line []byte) (Record, error) { return parseLine(line) }

// parseLine decodes one JSONL line.
func parseLine(line []byte) (Record, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return Record{}, fmt.Errorf("want a JSON object: %v", err)
	}
	var rec Record
	raw, ok := fields["step"]
	if !ok {
		return Record{}, errors.New(`missing "step"`)
	}
	step, err := strconv.ParseInt(string(raw), 10, 0)
	if err != nil || step < 0 {
		return Record{}, fmt.Errorf(`"step" = %s: want a non-negative integer`, raw)
	}
	rec.Step = int(step)
	if raw, ok := fields["agent"]; ok {
		if err := json.Unmarshal(raw, &rec.Agent); err != nil {
			return Record{}, fmt.Errorf(`"agent" = %s: want a string`, raw)
		}
	}
	if raw, ok := fields["time"]; ok {
		if err := json.Unmarshal(raw, &rec.Time); err != nil {
			return Record{}, fmt.Errorf(`"time" = %s: want a number`, raw)
		}
	}
	rec.Values = make(map[string]float64, len(fields))
	for k, raw := range fields {
		if reserved[k] {
			continue
		}
		if string(raw) == "null" {
			rec.Values[k] = math.NaN()
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return Record{}, fmt.Errorf("%q = %s: want a number or null", k, raw)
		}
		rec.Values[k] = v
	}
	return rec, nil
}

// truncateJSONL empties the JSONL file (resumeStep ≤ 0) or keeps its lines
// with step ≤ resumeStep, byte for byte.
func truncateJSONL(path string, resumeStep int) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var kept bytes.Buffer
	if resumeStep > 0 {
		lines := bytes.SplitAfter(data, []byte("\n"))
		for i, line := range lines {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			rec, err := parseLine(line)
			if err != nil {
				if isTorn(lines, i) {
					break // an incomplete last line from a crash
				}
				return fmt.Errorf("metrics: resume: %s:%d: %w", path, i+1, err)
			}
			if rec.Step <= resumeStep {
				kept.Write(line)
			}
		}
	}
	if bytes.Equal(kept.Bytes(), data) {
		return nil
	}
	if err := atomicfile.WriteFile(path, kept.Bytes()); err != nil {
		return fmt.Errorf("metrics: resume: %w", err)
	}
	return nil
}

// truncateEvents removes (resumeStep ≤ 0) or filters, keeping the file_version event
// and events with step ≤ resumeStep, the event files under tbDir/<run>/.
func truncateEvents(tbDir string, resumeStep int) error {
	paths, err := filepath.Glob(filepath.Join(tbDir, "*", eventFilePrefix+"*"))
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, path := range paths {
		if atomicfile.IsTemp(filepath.Base(path)) {
			continue
		}
		if resumeStep <= 0 {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("metrics: %w", err)
			}
			continue
		}
		events, err := readEvents(path)
		if err != nil && !errors.Is(err, errTruncated) {
			return fmt.Errorf("metrics: resume: %w", err)
		}
		kept := events[:0]
		for _, e := range events {
			if e.FileVersion != "" || e.Step <= int64(resumeStep) {
				kept = append(kept, e)
			}
		}
		if err == nil && len(kept) == len(events) {
			continue
		}
		if err := atomicfile.WriteFile(path, encodeEvents(kept)); err != nil {
			return fmt.Errorf("metrics: resume: %w", err)
		}
	}
	return nil
}
