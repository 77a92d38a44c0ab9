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
// values (sampling.stop, lora.target_modules) or a map (template.vars) completes to
// "=", since --set gives it whole.
func CompleteKey(typed string, n int, names []string) []string {
	// done: the sections typed whole ("agents[0]."), partial the rest; a
	// selector being typed may hold dots (agents[llama3.2-1b).
	whole := typed
	if open := strings.LastIndexByte(typed, '['); open > strings.LastIndexByte(typed, ']') {
		whole = typed[:open]
	}
	done, partial := "", typed
	if i := strings.LastIndexByte(whole, '.'); i >= 0 {
		done, partial = typed[:i+1], typed[i+1:]
	}
	t := reflect.TypeOf(Config{})
	if done != "" {
		steps, err := parseKeyPath(strings.TrimSuffix(done, "."))
		if err != nil {
			return nil
		}
		for _, st := range steps {
			f, ok := yamlFields(t)[st.key]
			if !ok {
				return nil
			}
			ft := deref(f.Type)
			if len(st.sel) > 0 {
				if len(st.sel) > 1 || !isSectionList(ft) {
					return nil
				}
				ft = deref(ft.Elem())
			}
			if ft.Kind() != reflect.Struct {
				return nil
			}
			t = ft
		}
	}
	fields := yamlFields(t)
	if key, sel, ok := strings.Cut(partial, "["); ok { // a selector being typed
		f, found := fields[key]
		if !found || !isSectionList(deref(f.Type)) || strings.ContainsAny(sel, "[]") {
			return nil
		}
		var out []string
		for _, s := range selectors(done+key, n, names) {
			if strings.HasPrefix(s, sel) {
				out = append(out, done+key+"["+s+"].")
			}
		}
		return out
	}
	var out []string
	for _, k := range sortedKeys(fields) {
		if !strings.HasPrefix(k, partial) {
			continue
		}
		switch ft := deref(fields[k].Type); {
		case ft.Kind() == reflect.Struct:
			out = append(out, done+k+".")
		case isSectionList(ft):
			out = append(out, done+k+"[", done+k+"=")
		default:
			out = append(out, done+k+"=")
		}
	}
	return out
}

// isSectionList reports whether t is a list of sections (agents,
// eval.sets), whose entries a key path selects with [i].
func isSectionList(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && deref(t.Elem()).Kind() == reflect.Struct
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
