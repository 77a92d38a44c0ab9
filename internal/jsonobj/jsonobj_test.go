package jsonobj

import (
	"strings"
	"testing"
)

func TestDecodeAndLine(t *testing.T) {
	tests := []struct {
		in, want, err string
		added         []Field
	}{
		{in: `{"b": 1.50, "a": [1, 2], "c": {"x": null}}`, want: `{"b":1.50,"a":[1, 2],"c":{"x": null}}` + "\n"},
		{in: `{"id":7,"equal":true,"x":"y"}`, added: []Field{{"equal", []byte("false")}}, want: `{"id":7,"x":"y","equal":false}` + "\n"},
		{in: `{}`, added: []Field{{"n", []byte("3")}, {"m", []byte(`"s"`)}}, want: `{"n":3,"m":"s"}` + "\n"},
		{in: `[1]`, err: "expected a JSON object"},
		{in: `{"a":1} {"b":2}`, err: "trailing data"},
		{in: `{"a":}`, err: "invalid JSON"},
		{in: ``, err: "invalid JSON"},
	}
	for _, tt := range tests {
		fields, err := Decode([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Decode(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Decode(%q): %v", tt.in, err)
		}
		if got := string(Line(fields, tt.added...)); got != tt.want {
			t.Errorf("Line(Decode(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
	fields, _ := Decode([]byte(`{"a":1,"b":2,"a":3}`))
	if got := string(Get(fields, "a")); got != "1" {
		t.Errorf("Get a = %q, want the first, 1", got)
	}
	if Get(fields, "z") != nil {
		t.Error("Get of a missing key is not nil")
	}
}
