package verify

import (
	"strconv"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hacrl/hacrl/internal/jsonobj"
	"io"
)

// Summary counts the lines processed by VerifyJSONL.
type Summary struct {
	Lines    int // non-blank input lines
	Equal    int // lines written with "equal": true
	NotEqual int // lines written with "equal": false
	Bad      int // lines reported to the error writer and not written
}

// VerifyJSONL reads JSON objects, one per line, each with string (or number)
// fields "answer" and "reference", and writes each object back to w, in
// order, with "equal": true|false appended (or replaced). The other fields
// keep their order and their exact text. A malformed line is reported to errw
// with its line number and skipped; blank lines are skipped. The error is
// non-nil only when reading, writing or ctx fails.
func VerifyJSONL(ctx context.Context, r io.Reader, w io.Writer, errw io.Writer) (Summary, error) {
	var sum Summary
	br := bufio.NewReaderSize(r, 1<<16)
	bw := bufio.NewWriter(w)
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			bw.Flush()
			return sum, err
		}
		line, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			bw.Flush()
			return sum, fmt.Errorf("reading line %d: %w", lineNo, readErr)
		}
		// A UTF-8 byte-order mark (some editors start a file with one) is
		// not part of the JSON.
		if trimmed := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\uFEFF"))); len(trimmed) > 0 {
			sum.Lines++
			out, eq, err := verifyLine(trimmed)
			switch {
			case err != nil:
				sum.Bad++
				if _, werr := fmt.Fprintf(errw, "line %d: %v\n", lineNo, err); werr != nil {
					return sum, fmt.Errorf("reporting line %d: %w", lineNo, werr)
				}
			default:
				if eq {
					sum.Equal++
				} else {
					sum.NotEqual++
				}
				if _, err := bw.Write(out); err != nil {
					return sum, fmt.Errorf("writing line %d: %w", lineNo, err)
				}
			}
		}
		if readErr != nil { // io.EOF
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("writing output: %w", err)
	}
	return sum, nil
}

// verifyLine checks one JSON object and returns it re-encoded with "equal".
func verifyLine(line []byte) ([]byte, bool, error) {
	fields, err := jsonobj.Decode(line)
	if err != nil {
		return nil, false, err
	}
	var answer, reference *string
	for _, f := range fields {
		switch f.Key {
		case "answer", "reference":
			s, err := scalarText(f.Raw)
			if err != nil {
				return nil, false, fmt.Errorf("field %q: %w", f.Key, err)
			}
			if f.Key == "answer" {
				answer = &s
			} else {
				reference = &s
			}
		}
	}
	if answer == nil || reference == nil {
		return nil, false, errors.New(`expected fields "answer" and "reference"`)
	}
	eq := EqualAnswer(*answer, *reference)
	return jsonobj.Line(fields, jsonobj.Field{Key: "equal", Raw: strconv.AppendBool(nil, eq)}), eq, nil
}

// scalarText returns a JSON string's value or a JSON number's literal text.
func scalarText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("expected a string or a number, got %s", raw)
}
