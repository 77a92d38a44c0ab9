package metrics

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// fileVersion is the first event of every TensorBoard event file.
const fileVersion = "brain.Event:2"

// Event is one record of a TensorBoard event file: the tensorflow.Event
// protobuf restricted to the fields this package writes.
type Event struct {
	WallTime    float64 // unix seconds (field 1)
	Step        int64   // field 2
	FileVersion string  // field 3, set only on a file's first event
	Values      []Value // summary.value (field 5 → 1), scalars only
}

// Value is one scalar of an event's summary (tensorflow.Summary.Value).
type Value struct {
	Tag         string  // field 1
	SimpleValue float32 // field 2
}

// Field numbers of tensorflow.Event, tensorflow.Summary and
// tensorflow.Summary.Value (event.proto, summary.proto).
const (
	eventWallTime    protowire.Number = 1
	eventStep        protowire.Number = 2
	eventFileVersion protowire.Number = 3
	eventSummary     protowire.Number = 5
	summaryValue     protowire.Number = 1
	valueTag         protowire.Number = 1
	valueSimpleValue protowire.Number = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is the TFRecord checksum: CRC-32C, rotated right by 15 bits and
// offset by a constant.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendEvent appends the protobuf encoding of e.
func appendEvent(b []byte, e Event) []byte {
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(e.WallTime))
	if e.Step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Step))
	}
	if e.FileVersion != "" {
		b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
		b = protowire.AppendString(b, e.FileVersion)
	}
	if len(e.Values) > 0 {
		var summary []byte
		for _, v := range e.Values {
			var value []byte
			value = protowire.AppendTag(value, valueTag, protowire.BytesType)
			value = protowire.AppendString(value, v.Tag)
			value = protowire.AppendTag(value, valueSimpleValue, protowire.Fixed32Type)
			value = protowire.AppendFixed32(value, math.Float32bits(v.SimpleValue))
			summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
			summary = protowire.AppendBytes(summary, value)
		}
		b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
		b = protowire.AppendBytes(b, summary)
	}
	return b
}

// appendFrame appends one TFRecord frame holding data: the length, the
// length's masked CRC, the data and the data's masked CRC, all little-endian.
func appendFrame(b, data []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b[start:]))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}

// errTruncated marks an event file that ends inside a frame, as a crash while
// writing leaves it.
var errTruncated = errors.New("file ends inside a record")

// ReadEvents parses every TFRecord frame of a TensorBoard event file, checks
// both CRCs of each and decodes the events. Fields other than those of Event
// are skipped.
func ReadEvents(path string) ([]Event, error) {
	events, err := readEvents(path)
	if err != nil {
		return nil, err
	}
	return events, nil
}

// readEvents is ReadEvents that also returns the events read before an error.
func readEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var events []Event
	var offset int64
	for i := 0; ; i++ {
		var head [12]byte
		n, err := io.ReadFull(r, head[:])
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: %w (%d of 12 header bytes)", path, i, offset, errTruncated, n)
		}
		if got, want := binary.LittleEndian.Uint32(head[8:]), maskedCRC(head[:8]); got != want {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: length CRC %#08x, want %#08x", path, i, offset, got, want)
		}
		length := binary.LittleEndian.Uint64(head[:8])
		if length > 1<<30 {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: length %d is implausibly large", path, i, offset, length)
		}
		data := make([]byte, length+4)
		if n, err := io.ReadFull(r, data); err != nil {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: %w (%d of %d data bytes)", path, i, offset, errTruncated, n, len(data))
		}
		data, crc := data[:length], binary.LittleEndian.Uint32(data[length:])
		if want := maskedCRC(data); crc != want {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: data CRC %#08x, want %#08x", path, i, offset, crc, want)
		}
		e, err := decodeEvent(data)
		if err != nil {
			return events, fmt.Errorf("metrics: %s: record %d at byte %d: %w", path, i, offset, err)
		}
		events = append(events, e)
		offset += 16 + int64(length)
	}
}

// decodeEvent decodes a tensorflow.Event protobuf.
func decodeEvent(b []byte) (Event, error) {
	var e Event
	err := walkFields(b, "Event", func(num protowire.Number, typ protowire.Type, field []byte) (int, error) {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(field)
			e.WallTime = math.Float64frombits(v)
			return n, nil
		case num == eventStep && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(field)
			e.Step = int64(v)
			return n, nil
		case num == eventFileVersion && typ == protowire.BytesType:
			v, n := protowire.ConsumeString(field)
			e.FileVersion = v
			return n, nil
		case num == eventSummary && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(field)
			if n < 0 {
				return n, nil
			}
			values, err := decodeSummary(v)
			e.Values = append(e.Values, values...)
			return n, err
		}
		return -1, nil
	})
	return e, err
}

// decodeSummary decodes the scalar values of a tensorflow.Summary; values of
// other kinds (histograms, images, tensors) are skipped.
func decodeSummary(b []byte) ([]Value, error) {
	var values []Value
	err := walkFields(b, "Summary", func(num protowire.Number, typ protowire.Type, field []byte) (int, error) {
		if num != summaryValue || typ != protowire.BytesType {
			return -1, nil
		}
		vb, n := protowire.ConsumeBytes(field)
		if n < 0 {
			return n, nil
		}
		var v Value
		scalar := false
		err := walkFields(vb, "Summary.Value", func(num protowire.Number, typ protowire.Type, field []byte) (int, error) {
			switch {
			case num == valueTag && typ == protowire.BytesType:
				s, n := protowire.ConsumeString(field)
				v.Tag = s
				return n, nil
			case num == valueSimpleValue && typ == protowire.Fixed32Type:
				f, n := protowire.ConsumeFixed32(field)
				v.SimpleValue = math.Float32frombits(f)
				scalar = true
				return n, nil
			}
			return -1, nil
		})
		if scalar {
			values = append(values, v)
		}
		return n, err
	})
	return values, err
}

// walkFields calls visit for each field of the protobuf message b with the
// bytes after the field's tag. visit returns how many bytes it consumed, or
// -1 to have the field skipped; a negative protowire length is an error.
func walkFields(b []byte, message string, visit func(protowire.Number, protowire.Type, []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad %s field tag: %w", message, protowire.ParseError(n))
		}
		b = b[n:]
		m, err := visit(num, typ, b)
		if err != nil {
			return err
		}
		if m == -1 {
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return fmt.Errorf("bad %s field %d: %w", message, num, protowire.ParseError(m))
		}
		b = b[m:]
	}
	return nil
}

// eventWriter appends events to one TensorBoard event file.
type eventWriter struct {
	f   *os.File
	buf []byte
}

// createEventFile creates a new event file at path and writes its
// file_version event.
func createEventFile(path string, wallTime float64) (*eventWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	w := &eventWriter{f: f}
	if err := w.write(Event{WallTime: wallTime, FileVersion: fileVersion}); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// write appends one event in a single write call.
func (w *eventWriter) write(e Event) error {
	w.buf = appendFrame(w.buf[:0], appendEvent(nil, e))
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func (w *eventWriter) close() error {
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// encodeEvents returns the frames of events, for rewriting a file.
func encodeEvents(events []Event) []byte {
	var b []byte
	for _, e := range events {
		b = appendFrame(b, appendEvent(nil, e))
	}
	return b
}
