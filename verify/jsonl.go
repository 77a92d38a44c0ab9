package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// field is one member of a JSON object, kept as its original text.
type field struct {
	key string
	raw json.RawMessage
}

// verifyLine checks one JSON object and returns it re-encoded with "equal".
func verifyLine(line []byte) ([]byte, bool, error) {
	fields, err := decodeObject(line)
	if err != nil {
		return nil, false, err
	}
	var answer, reference *string
	for _, f := range fields {
		switch f.key {
		case "answer", "reference":
			s, err := scalarText(f.raw)
			if err != nil {
				return nil, false, fmt.Errorf("field %q: %w", f.key, err)
			}
			if f.key == "answer" {
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
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range fields {
		if f.key == "equal" {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(f.key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(f.raw)
		n++
	}
	if n > 0 {
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, `"equal":%t}`+"\n", eq)
	return b.Bytes(), eq, nil
}

// decodeObject decodes a JSON object into its members in order.
func decodeObject(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("expected a JSON object")
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		key := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("invalid JSON in field %q: %w", key, err)
		}
		fields = append(fields, field{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	return fields, nil
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
