package metrics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMaskedCRC(t *testing.T) {
	// CRC-32C of "123456789" is the standard check value 0xe3069283.
	if c := crc32.Checksum([]byte("123456789"), castagnoli); c != 0xe3069283 {
		t.Fatalf("CRC-32C check value = %#x", c)
	}
	want := bits.RotateLeft32(0xe3069283, -15) + 0xa282ead8
	if got := maskedCRC([]byte("123456789")); got != want {
		t.Errorf("maskedCRC = %#x, want %#x", got, want)
	}
}

func TestEventEncoding(t *testing.T) {
	// Event{wall_time: 1, step: 2, summary {value {tag: "a", simple_value: 1}}},
	// encoded by hand from event.proto and summary.proto.
	want := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, // field 1, fixed64: 1.0
		0x10, 0x02, // field 2, varint: 2
		0x2a, 0x0a, // field 5, 10 bytes: Summary
		0x0a, 0x08, // Summary.value (1), 8 bytes
		0x0a, 0x01, 'a', // Value.tag (1)
		0x15, 0, 0, 0x80, 0x3f, // Value.simple_value (2), fixed32: 1.0
	}
	e := Event{WallTime: 1, Step: 2, Values: []Value{{Tag: "a", SimpleValue: 1}}}
	if got := appendEvent(nil, e); !bytes.Equal(got, want) {
		t.Fatalf("appendEvent = % x\nwant          % x", got, want)
	}
	back, err := decodeEvent(want)
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Errorf("decodeEvent = %+v (%v), want %+v", back, err, e)
	}
	fv := appendEvent(nil, Event{WallTime: 0, FileVersion: fileVersion})
	if !bytes.HasSuffix(fv, append([]byte{0x1a, 13}, fileVersion...)) {
		t.Errorf("file_version event = % x, want field 3 with %q", fv, fileVersion)
	}
	// Unknown fields (here a graph_def, field 4) are skipped.
	withGraph := append(protoBytes(0x22, 0x02, 0xde, 0xad), want...)
	if back, err := decodeEvent(withGraph); err != nil || !reflect.DeepEqual(back, e) {
		t.Errorf("decodeEvent with an unknown field = %+v (%v)", back, err)
	}
	if _, err := decodeEvent([]byte{0x2a, 0x05, 0x0a}); err == nil {
		t.Error("decodeEvent accepted a summary running past the end")
	}
}

func protoBytes(b ...byte) []byte { return b }

func TestEventFileRoundTripAndName(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Fresh, WithHost("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Step: 0, Agent: "m", Time: 1700000000.25, Values: map[string]float64{"reward/mean": 0.1, "accuracy/train": 0.3}},
		{Step: 7, Agent: "m", Time: 1700000010.5, Values: map[string]float64{"reward/mean": -2.5}},
		{Step: 7, Agent: "m", Time: 1700000011, Values: map[string]float64{}}, // no values: JSONL only
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "tb", "m", "*"))
	if len(paths) != 1 || !regexp.MustCompile(`/tb/m/events\.out\.tfevents\.1700000000\.node-1$`).MatchString(paths[0]) {
		t.Fatalf("event files = %v, want one tb/m/events.out.tfevents.1700000000.node-1", paths)
	}
	got, err := ReadEvents(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{WallTime: 1700000000.25, FileVersion: fileVersion},
		{WallTime: 1700000000.25, Step: 0, Values: []Value{{"accuracy/train", 0.3}, {"reward/mean", 0.1}}},
		{WallTime: 1700000010.5, Step: 7, Values: []Value{{"reward/mean", -2.5}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadEvents =\n%+v\nwant\n%+v", got, want)
	}
}

func TestReadEventsCorruption(t *testing.T) {
	frames := encodeEvents([]Event{{WallTime: 1, FileVersion: fileVersion}, {WallTime: 2, Step: 3, Values: []Value{{"x", 1}}}})
	first := 16 + len(appendEvent(nil, Event{WallTime: 1, FileVersion: fileVersion}))
	flip := func(i int) []byte {
		b := bytes.Clone(frames)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"length CRC", flip(first + 9), "record 1 at byte " + strconv.Itoa(first) + ": length CRC"},
		{"data CRC", flip(first + 13), "record 1 at byte " + strconv.Itoa(first) + ": data CRC"},
		{"stored CRC", flip(len(frames) - 1), "record 1 at byte " + strconv.Itoa(first) + ": data CRC"},
		{"truncated data", frames[:len(frames)-2], "record 1 at byte " + strconv.Itoa(first) + ": file ends inside a record"},
		{"truncated header", frames[:first+5], "(5 of 12 header bytes)"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
		os.WriteFile(path, tc.file, 0o644)
		_, err := ReadEvents(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadEvents error = %v, want one naming the file and containing %q", tc.name, err, tc.want)
		}
	}
	// A frame whose CRCs hold but whose payload is not an Event.
	path := filepath.Join(dir, "garbage")
	os.WriteFile(path, appendFrame(nil, []byte{0xff}), 0o644)
	if _, err := ReadEvents(path); err == nil || !strings.Contains(err.Error(), "bad Event field") {
		t.Errorf("garbage payload: error = %v, want 'bad Event field'", err)
	}
	// The frame layout itself: length, masked CRC of the length, data, masked CRC.
	fr := appendFrame(nil, []byte("abc"))
	if binary.LittleEndian.Uint64(fr) != 3 || binary.LittleEndian.Uint32(fr[8:]) != maskedCRC(fr[:8]) ||
		string(fr[12:15]) != "abc" || binary.LittleEndian.Uint32(fr[15:]) != maskedCRC([]byte("abc")) || len(fr) != 19 {
		t.Errorf("frame = % x", fr)
	}
}

// FuzzDecodeEvent checks that decoding arbitrary bytes never panics and that
// whatever decodes re-encodes to an event that decodes the same.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(appendEvent(nil, Event{WallTime: 1, Step: 2, Values: []Value{{"a", 1}}}))
	f.Add(appendEvent(nil, Event{WallTime: 3, FileVersion: fileVersion}))
	f.Add([]byte{0x2a, 0x05, 0x0a})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEvent(b)
		if err != nil {
			return
		}
		again, err := decodeEvent(appendEvent(nil, e))
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(again), normalize(e)) {
			t.Fatalf("round trip: %+v became %+v", e, again)
		}
	})
}

// normalize renders an event with its floats as bit patterns, so that NaNs
// compare equal.
func normalize(e Event) string {
	return fmt.Sprintf("%x %d %q %v", math.Float64bits(e.WallTime), e.Step, e.FileVersion, valuesBits(e.Values))
}

func valuesBits(vs []Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%q=%x", v.Tag, math.Float32bits(v.SimpleValue)))
	}
	return out
}
