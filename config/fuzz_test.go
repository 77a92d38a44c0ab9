package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse feeds any bytes to the run and SFT config parsers. Each either
// refuses the document with errors that each name where the problem is (a
// top-level key of the config, with the line when the key is in the file,
// or "not valid YAML"), or accepts it, and then the config re-validates and
// survives Marshal and Parse unchanged. The seeds are the shipped configs
// (examples/**/*.yaml) and this package's test config.
func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	for _, path := range shippedConfigs(f) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	runKeys := topKeys(reflect.TypeFor[Config]())
	sftKeys := topKeys(reflect.TypeFor[SFT]())
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Count(data, []byte("\n")) + 1
		c, err := Parse(data)
		if err != nil {
			checkPlaces(t, "Parse", err, runKeys, lines)
		} else {
			if err := c.Validate(); err != nil {
				t.Fatalf("Parse accepted a config that Validate refuses: %v", err)
			}
			out, err := Marshal(c)
			if err != nil {
				t.Fatalf("Marshal of a parsed config: %v", err)
			}
			back, err := Parse(out)
			if err != nil {
				t.Fatalf("Marshal wrote a config Parse refuses: %v\n%s", err, out)
			}
			if !sameValues(c, back) {
				t.Fatalf("round trip differs:\n%+v\n%+v\n%s", c, back, out)
			}
		}
		s, err := ParseSFT(data)
		if err != nil {
			checkPlaces(t, "ParseSFT", err, sftKeys, lines)
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSFT accepted a config that Validate refuses: %v", err)
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatalf("Marshal of a parsed SFT config: %v", err)
		}
		back, err := ParseSFT(out)
		if err != nil {
			t.Fatalf("Marshal wrote an SFT config ParseSFT refuses: %v\n%s", err, out)
		}
		if !sameSFTValues(s, back) {
			t.Fatalf("SFT round trip differs:\n%+v\n%+v\n%s", s, back, out)
		}
	})
}

// shippedConfigs lists the YAML files under examples/.
func shippedConfigs(tb testing.TB) []string {
	var paths []string
	err := filepath.WalkDir("../examples", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil || len(paths) < 10 {
		tb.Fatalf("shipped configs: %d found: %v", len(paths), err)
	}
	return paths
}

// topKeys are the YAML keys of a config type's top level.
func topKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{"(top level)": true}
	for k := range yamlFields(t) {
		keys[k] = true
	}
	return keys
}

// placeLine is one problem of a refused config: a key path (its first key,
// the rest), the line when known, and what is wrong.
var placeLine = regexp.MustCompile(`^([^ :.\[]+)(.*?)(?: \(line (\d+)\))?: (.+)$`)

// unknownKey is the refusal of a key the config does not have, with its
// line and the valid keys.
var unknownKey = regexp.MustCompile(`^.* \(line (\d+)\): unknown key; valid keys here: \S`)

// checkPlaces checks that every line of err names a place: "not valid
// YAML", or a key path starting with a top-level key of the config, with
// a line within the document when it gives one; a top-level key the config
// does not have (any text, "00 0" included) is named with its line and the
// valid keys.
func checkPlaces(t *testing.T, fn string, err error, keys map[string]bool, lines int) {
	t.Helper()
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, "not valid YAML: ") || strings.HasPrefix(line, "(top level) (line ") {
			continue
		}
		if m := unknownKey.FindStringSubmatch(line); m != nil { // any text is a key ("00 0", ".")
			if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines {
				t.Fatalf("%s: error line %q names line %s of a %d-line document", fn, line, m[1], lines)
			}
			continue
		}
		m := placeLine.FindStringSubmatch(line)
		switch {
		case m == nil:
			t.Fatalf("%s: error line %q names no place (whole error: %v)", fn, line, err)
		case !keys[m[1]]:
			t.Fatalf("%s: error line %q names no key of the config (whole error: %v)", fn, line, err)
		case m[3] != "":
			if n, _ := strconv.Atoi(m[3]); n < 1 || n > lines {
				t.Fatalf("%s: error line %q names line %s of a %d-line document", fn, line, m[3], lines)
			}
		}
	}
}
