package tokenizer

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// pyStrMethods are Python's str methods that gonja implements.
var pyStrMethods = []string{"capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs",
	"find", "format", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
	"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
	"lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
	"rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
	"translate", "upper", "zfill"}

// chatMethods are gonja's methods with strip, lstrip and rstrip as Python
// has them: gonja 2.9.1's fail when called without an argument, where
// Python strips whitespace ("x ".rstrip()), and strip only ASCII
// whitespace, where Python strips all that str.isspace accepts.
func chatMethods() exec.Methods {
	m := builtins.Methods
	str := map[string]exec.Method[string]{}
	for _, name := range pyStrMethods {
		if f, ok := m.Str.Get(name); ok {
			str[name] = f
		}
	}
	strip := func(name string, left, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, arguments *exec.VarArgs) (any, error) {
			var chars any
			if err := arguments.Take(
				exec.PositionalArgument("chars", exec.AsValue(nil), exec.AnyArgument(&chars)),
			); err != nil {
				return nil, exec.ErrInvalidCall(err)
			}
			return pyStrip(name, self, chars, left, right)
		}
	}
	str["strip"] = strip("strip", true, true)
	str["lstrip"] = strip("lstrip", true, false)
	str["rstrip"] = strip("rstrip", false, true)
	split := func(name string, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, arguments *exec.VarArgs) (any, error) {
			var sep any
			maxsplit := -1
			if err := arguments.Take(
				exec.KeywordArgument("sep", exec.AsValue(nil), exec.AnyArgument(&sep)),
				exec.KeywordArgument("maxsplit", exec.AsValue(-1), exec.IntArgument(&maxsplit)),
			); err != nil {
				return nil, exec.ErrInvalidCall(err)
			}
			return pySplit(name, self, sep, maxsplit, right)
		}
	}
	str["split"] = split("split", false)
	str["rsplit"] = split("rsplit", true)
	m.Str = exec.NewMethodSet(str)
	return m
}

// pyList is a list as a chat template sees it (messages, what split
// returns), indexed as Python indexes: gonja 2.9.1 reads x[-1] of a list of
// one item as undefined (its test of a negative index is off by one), which
// made Qwen3's template fail on an assistant message holding </think> but
// no <think> (content.split('</think>')[0]...split('<think>')[-1]).
type pyList []any

// GetItem is l[key] for an integer key, negative ones from the end.
func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.AsValue(l[i]), true
}

// pySplit is Python's str.split (or rsplit, from the right) of s: sep nil
// splits at runs of whitespace and drops empty parts, a string splits at
// each occurrence; at most maxsplit splits when it is not negative.
// gonja's own refuses split() without a separator and splits nothing with
// maxsplit 1.
func pySplit(name, s string, sep any, maxsplit int, right bool) (pyList, error) {
	var parts []string
	switch sep := sep.(type) {
	case nil:
		parts = splitSpace(s, maxsplit, right)
	case string:
		switch {
		case sep == "":
			return nil, fmt.Errorf("%s: empty separator", name)
		case maxsplit < 0:
			parts = strings.Split(s, sep)
		case !right:
			parts = strings.SplitN(s, sep, maxsplit+1)
		default:
			rest := s
			for len(parts) < maxsplit {
				k := strings.LastIndex(rest, sep)
				if k < 0 {
					break
				}
				parts = append(parts, rest[k+len(sep):])
				rest = rest[:k]
			}
			parts = append(parts, rest)
			slices.Reverse(parts)
		}
	default:
		return nil, fmt.Errorf("%s: sep must be None or str, got %v", name, sep)
	}
	l := make(pyList, len(parts))
	for i, p := range parts {
		l[i] = p
	}
	return l, nil
}

// splitSpace splits s at runs of Python whitespace, at most maxsplit times
// (from the right when right is set) when maxsplit is not negative; the
// unsplit rest keeps its whitespace on the inside.
func splitSpace(s string, maxsplit int, right bool) []string {
	parts := []string{}
	for {
		if right {
			s = strings.TrimRightFunc(s, pyIsSpace)
		} else {
			s = strings.TrimLeftFunc(s, pyIsSpace)
		}
		if s == "" {
			break
		}
		if maxsplit >= 0 && len(parts) == maxsplit {
			parts = append(parts, s)
			break
		}
		if right {
			i := lastSpaceEnd(s)
			parts = append(parts, s[i:])
			s = s[:i]
		} else {
			i := strings.IndexFunc(s, pyIsSpace)
			if i < 0 {
				i = len(s)
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
	}
	if right {
		slices.Reverse(parts)
	}
	return parts
}

// lastSpaceEnd is where the last run of non-space characters of s starts:
// the end of its last whitespace character, 0 when it has none.
func lastSpaceEnd(s string) int {
	i := strings.LastIndexFunc(s, pyIsSpace)
	if i < 0 {
		return 0
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return i + w
}

// filterTrim is Jinja's trim: Python's str.strip (gonja's strips what Go's
// unicode.IsSpace accepts, which differs from Python's str.isspace).
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	var chars any
	if err := params.Take(exec.KeywordArgument("chars", exec.AsValue(nil), exec.AnyArgument(&chars))); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.IsString() {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("trim: %s is not a string", in.String())))
	}
	s, err := pyStrip("trim", in.String(), chars, true, true)
	if err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsValue(s)
}

// pyStrip is Python's str.strip (left and right), lstrip or rstrip of s:
// chars nil strips whitespace, a string strips the characters it holds.
func pyStrip(name, s string, chars any, left, right bool) (string, error) {
	var cut func(rune) bool
	switch c := chars.(type) {
	case nil:
		cut = pyIsSpace
	case string:
		cut = func(r rune) bool { return strings.ContainsRune(c, r) }
	default:
		return "", fmt.Errorf("%s: arg must be None or str, got %v", name, chars)
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

// pyIsSpace is Python 3's str.isspace for one character: the ASCII
// whitespace with \x1c–\x1f, and the Unicode White_Space characters.
func pyIsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ', 0x85, 0xa0, 0x1680,
		0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return 0x2000 <= r && r <= 0x200a
}

// filterToJSON is transformers' tojson for chat templates: Python's
// json.dumps(x, ensure_ascii=False, indent=indent), so ", " and ": "
// separators and no HTML escaping (gonja's own is Go's compact, escaping
// encoding). Mapping keys come out sorted: a Go map has no order of its own.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	for name, v := range params.KwArgs {
		switch {
		case name == "indent" && v.IsInteger():
			indent = v.Integer()
		case name == "indent" && v.IsNil():
		case name == "ensure_ascii" || name == "sort_keys" || name == "separators":
			// accepted; sorted keys and ensure_ascii=False are the behaviour
		default:
			return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: unexpected argument %s=%s", name, v.String())))
		}
	}
	if len(params.Args) > 0 {
		if !params.Args[0].IsInteger() {
			return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: indent must be an integer, got %s", params.Args[0].String())))
		}
		indent = params.Args[0].Integer()
	}
	var b strings.Builder
	if err := writePyJSON(&b, reflect.ValueOf(in.Interface()), indent, 0); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	return exec.AsSafeValue(b.String())
}

// writePyJSON writes v as Python's json.dumps does.
func writePyJSON(b *strings.Builder, v reflect.Value, indent, depth int) error {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		switch x := v.Interface().(type) {
		case *exec.Value:
			v = reflect.ValueOf(x.Interface())
			continue
		case *exec.Dict:
			keys := make([]string, len(x.Pairs))
			vals := make([]reflect.Value, len(x.Pairs))
			for i, p := range x.Pairs {
				keys[i], vals[i] = p.Key.String(), reflect.ValueOf(p.Value.Interface())
			}
			return writeObject(b, keys, vals, indent, depth)
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		b.WriteString("null")
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		b.WriteString(pyFloat(v.Float()))
	case reflect.String:
		writePyString(b, v.String())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("null")
			return nil
		}
		if v.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			separate(b, i, indent, depth+1)
			if err := writePyJSON(b, v.Index(i), indent, depth+1); err != nil {
				return err
			}
		}
		closing(b, indent, depth)
		b.WriteByte(']')
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		keys := make([]string, 0, v.Len())
		byKey := make(map[string]reflect.Value, v.Len())
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			keys = append(keys, k)
			byKey[k] = it.Value()
		}
		sort.Strings(keys)
		vals := make([]reflect.Value, len(keys))
		for i, k := range keys {
			vals[i] = byKey[k]
		}
		return writeObject(b, keys, vals, indent, depth)
	default:
		return fmt.Errorf("tojson: cannot encode a %s", v.Type())
	}
	return nil
}

func writeObject(b *strings.Builder, keys []string, vals []reflect.Value, indent, depth int) error {
	if len(keys) == 0 {
		b.WriteString("{}")
		return nil
	}
	b.WriteByte('{')
	for i, k := range keys {
		separate(b, i, indent, depth+1)
		writePyString(b, k)
		b.WriteString(": ")
		if err := writePyJSON(b, vals[i], indent, depth+1); err != nil {
			return err
		}
	}
	closing(b, indent, depth)
	b.WriteByte('}')
	return nil
}

// separate writes what comes before item i of a list or object.
func separate(b *strings.Builder, i, indent, depth int) {
	if i > 0 {
		b.WriteByte(',')
		if indent < 0 {
			b.WriteByte(' ')
		}
	}
	if indent >= 0 {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", indent*depth))
	}
}

// closing writes what comes before a list's or object's closing bracket.
func closing(b *strings.Builder, indent, depth int) {
	if indent >= 0 {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(" ", indent*depth))
	}
}

// pyFloat is Python's repr of a float, as json.dumps writes it.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writePyString writes s as a JSON string with ensure_ascii=False.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
