package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// CompleteKey completes the KEY of a --set KEY=VALUE being typed, for shell
// completion: the key paths of the run schema that extend typed, a value's
// key followed by "=", a section's by ".", a list of sections' by "[" (or,
// once the bracket is typed, by its selectors: the indexes of the n entries
// the file has and the names among names, each followed by "]."). A list of
// values (sampling.stop, eval.sets) or a map (template.vars) completes to
// "=", since --set gives it whole.
func CompleteKey(typed string, n int, names []string) []string {
	t := reflect.TypeOf(Config{})
	rest := typed
	done := ""
	for {
		i := strings.IndexAny(rest, ".[")
		if i < 0 {
			break
		}
		f, ok := yamlFields(t)[rest[:i]]
		if !ok {
			return nil
		}
		ft := deref(f.Type)
		if rest[i] == '[' {
			if ft.Kind() != reflect.Slice || deref(ft.Elem()).Kind() != reflect.Struct {
				return nil
			}
			j := strings.IndexByte(rest, ']')
			if j < 0 { // completing the selector
				prefix := done + rest[:i+1]
				var out []string
				for _, sel := range selectors(rest[:i], n, names) {
					if strings.HasPrefix(sel, rest[i+1:]) {
						out = append(out, prefix+sel+"].")
					}
				}
				return out
			}
			if j+1 >= len(rest) || rest[j+1] != '.' {
				return nil
			}
			t = deref(ft.Elem())
			done += rest[:j+2]
			rest = rest[j+2:]
			continue
		}
		if ft.Kind() != reflect.Struct {
			return nil
		}
		t = ft
		done += rest[:i+1]
		rest = rest[i+1:]
	}
	fields := yamlFields(t)
	var out []string
	for _, k := range sortedKeys(fields) {
		if !strings.HasPrefix(k, rest) {
			continue
		}
		ft := deref(fields[k].Type)
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, done+k+".")
		case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
			out = append(out, done+k+"[", done+k+"=")
		default:
			out = append(out, done+k+"=")
		}
	}
	return out
}

// selectors are what may stand in the brackets of list: for agents, the
// indexes of the file's n agents and their names; for another list, 0.
func selectors(list string, n int, names []string) []string {
	if list != "agents" {
		return []string{"0"}
	}
	out := make([]string, 0, n+len(names))
	for i := range n {
		out = append(out, strconv.Itoa(i))
	}
	names = slices.Clone(names)
	slices.Sort(names)
	return append(out, names...)
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
