package metrics

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

// Keys returns the sorted union of the metric keys of recs.
func Keys(recs []Record) []string {
	set := map[string]bool{}
	for _, r := range recs {
		for k := range r.Values {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Agents returns the sorted distinct agents of recs ("" for run-wide records
// sorts first).
func Agents(recs []Record) []string {
	set := map[string]bool{}
	for _, r := range recs {
		set[r.Agent] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// OfAgent returns the records of agent among recs, in order ("" selects
// the run-wide records).
func OfAgent(recs []Record, agent string) []Record {
	var out []Record
	for _, r := range recs {
		if r.Agent == agent {
			out = append(out, r)
		}
	}
	return out
}

// WriteCSV writes recs as CSV with a header row: step, agent, time, then one
// column per metric key of Keys(recs). A value a record lacks is an empty
// cell; NaN is written as "NaN".
func WriteCSV(w io.Writer, recs []Record) error {
	keys := Keys(recs)
	cw := csv.NewWriter(w)
	row := append([]string{"step", "agent", "time"}, keys...)
	if err := cw.Write(row); err != nil {
		return fmt.Errorf("metrics: csv: %w", err)
	}
	for _, r := range recs {
		row = append(row[:0], strconv.Itoa(r.Step), r.Agent, strconv.FormatFloat(r.Time, 'f', -1, 64))
		for _, k := range keys {
			v, ok := r.Values[k]
			cell := ""
			if ok {
				cell = strconv.FormatFloat(v, 'g', -1, 64)
			}
			row = append(row, cell)
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("metrics: csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("metrics: csv: %w", err)
	}
	return nil
}
