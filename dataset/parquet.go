package dataset

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/hacrl/hacrl/task"
)

// LoadParquet reads one problem per row of a Parquet file. Its defaults fit
// verl's layout: the question is the last user message of the "prompt" chat
// list and the answer is "reward_model.ground_truth" (other columns such as
// data_source and extra_info can be named as IDField, e.g.
// "extra_info.index"). Nested groups and lists read as objects and lists, so
// the same dotted paths work as for JSONL.
func LoadParquet(path string, opts Options) (_ []task.Problem, err error) {
	// The library panics on some damaged files (a page index that runs past
	// its buffer): a damaged file is an error naming it, not a crash.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("dataset %s: not a readable Parquet file: %v", path, p)
		}
	}()
	f, b, err := open(path, opts, "prompt", "reward_model.ground_truth")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("dataset %s: not a readable Parquet file: %w", path, err)
	}
	schema := pf.Schema()
	row := 0
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		if err := readRowGroup(rg, schema, buf, func(rec map[string]any) error {
			if err := b.add(rec); err != nil {
				return fmt.Errorf("dataset %s: row %d: %w", path, row, err)
			}
			row++
			return nil
		}); err != nil {
			if errors.Is(err, errReconstruct) {
				return nil, fmt.Errorf("dataset %s: row %d: %w", path, row, err)
			}
			return nil, err
		}
	}
	return b.result(path, "rows")
}

var errReconstruct = errors.New("cannot decode row")

// readRowGroup decodes the rows of rg into objects and passes them to add.
func readRowGroup(rg parquet.RowGroup, schema *parquet.Schema, buf []parquet.Row, add func(map[string]any) error) error {
	rows := rg.Rows()
	defer rows.Close()
	for {
		n, err := rows.ReadRows(buf)
		for _, r := range buf[:n] {
			rec, rerr := reconstruct(schema, r)
			if rerr != nil {
				return rerr
			}
			if aerr := add(rec); aerr != nil {
				return aerr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errReconstruct, err)
		}
	}
}

// reconstruct decodes one row; the library panics on rows its schema cannot
// rebuild, which is reported as an error.
func reconstruct(schema *parquet.Schema, r parquet.Row) (rec map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errReconstruct, p)
		}
	}()
	rec = map[string]any{}
	if err := schema.Reconstruct(&rec, r); err != nil {
		return nil, fmt.Errorf("%w: %w", errReconstruct, err)
	}
	return rec, nil
}
