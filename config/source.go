package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/internal/suggest"

	"go.yaml.in/yaml/v3"
)

// A Set is one command-line override of a config key, given as --set
// KEY=VALUE. KEY is the key's path with the file's key names: sections
// joined by dots, a list entry by its index or, in a list of named entries
// (agents, eval.sets), by its name: steps, agents[0].optimizer.lr,
// agents[llama-bpe].sampling.temperature, eval.sets[0].problems. VALUE is
// YAML, read as the file's values are: a scalar (2e-4, true, plain) or a
// flow list or mapping ([{name: test, split: test, problems: 50}]); an empty
// VALUE is null, which leaves the key to its default.
//
// Overrides are applied in order to the file's YAML before it is decoded,
// so an override is checked exactly as the same edit of the file would be,
// and errors in what it set name the --set instead of a line. A key the
// file leaves out is added (with the sections above it); a list entry must
// exist: an index past the end is an error, and a whole list is replaced by
// setting the list itself.
type Set struct {
	// Arg is the argument as given: KEY=VALUE.
	Arg string

	steps []pathStep
	value *yaml.Node
	flag  string // for a FlagOverride: the flag as given, which errors name
}

// FlagOverride is the override of a flag of its own, such as --steps 100
// for the key steps, with its value as the flag parsed it: applied and
// checked as a Set is, in the order given, but its errors name the flag
// (--steps -1: must be >= 0), and it is not among a parsed config's Sets.
func FlagOverride(flag, key string, value any) (Set, error) {
	steps, err := parseKeyPath(key)
	if err != nil {
		return Set{}, fmt.Errorf("%s: key %q: %v", flag, key, err)
	}
	n := &yaml.Node{}
	if err := n.Encode(value); err != nil {
		return Set{}, fmt.Errorf("%s: %v", flag, err)
	}
	return Set{Arg: fmt.Sprintf("%s=%v", key, value), steps: steps, value: n, flag: fmt.Sprintf("%s %v", flag, value)}, nil
}

// label is how errors name the override.
func (s Set) label() string {
	if s.flag != "" {
		return s.flag
	}
	return "--set " + s.Arg
}

// pathStep is a key of a mapping, then any list selectors after it.
type pathStep struct {
	key string
	sel []string // [0], [llama-bpe]: an index or an entry's name
}

// ParseSet parses a --set argument, KEY=VALUE.
func ParseSet(arg string) (Set, error) {
	s := Set{Arg: arg}
	key, value, ok := strings.Cut(arg, "=")
	if !ok {
		return s, fmt.Errorf("--set %s: want KEY=VALUE, such as agents[0].optimizer.lr=2e-4", arg)
	}
	steps, err := parseKeyPath(key)
	if err != nil {
		return s, fmt.Errorf("--set %s: key %q: %v", arg, key, err)
	}
	s.steps = steps
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
		return s, fmt.Errorf("--set %s: value %q is not valid YAML: %v", arg, value, err)
	}
	if len(doc.Content) == 0 {
		s.value = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	} else {
		s.value = doc.Content[0]
	}
	return s, nil
}

// ParseSets parses --set arguments (see ParseSet).
func ParseSets(args []string) ([]Set, error) {
	sets := make([]Set, 0, len(args))
	for _, a := range args {
		s, err := ParseSet(a)
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// SetArgs are the arguments of the --set overrides among sets, as given
// (FlagOverrides left out); nil when there are none.
func SetArgs(sets []Set) []string {
	var args []string
	for _, s := range sets {
		if s.flag == "" {
			args = append(args, s.Arg)
		}
	}
	return args
}

// parseKeyPath splits a key path: name(.name)*, each name followed by any
// number of [selector].
func parseKeyPath(key string) ([]pathStep, error) {
	var steps []pathStep
	rest := key
	for {
		i := strings.IndexAny(rest, ".[]")
		name := rest
		if i >= 0 {
			name = rest[:i]
		}
		if name == "" {
			return nil, fmt.Errorf("empty key name (want names joined by dots, with [index] after a list)")
		}
		st := pathStep{key: name}
		rest = rest[len(name):]
		for strings.HasPrefix(rest, "[") {
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return nil, fmt.Errorf("[ without ]")
			}
			sel := rest[1:j]
			if sel == "" || strings.ContainsAny(sel, "[") {
				return nil, fmt.Errorf("want [INDEX] or [NAME], got %s", rest[:j+1])
			}
			st.sel = append(st.sel, sel)
			rest = rest[j+1:]
		}
		steps = append(steps, st)
		switch {
		case rest == "":
			return steps, nil
		case rest[0] == '.':
			rest = rest[1:]
		default:
			return nil, fmt.Errorf("unexpected %q after %s", rest[:1], name)
		}
	}
}

// source is where a parsed config's values came from: the line of every key
// path in the file, and the overrides applied on top of it. A line below 0
// stands for an override: -1 the first, -2 the second, ....
type source struct {
	lines map[string]int
	sets  []Set
	paths []string // the key path each set resolved to (its [name]s as indexes)
}

// at says where the value at path came from, for an error message: "path
// (line 7)" for a line of the file, "--set KEY=VALUE" for the value an
// override set ("--set KEY=VALUE: path" for a key inside it), or the path
// alone.
func (s *source) at(path string, line int) string {
	switch {
	case line > 0:
		return fmt.Sprintf("%s (line %d)", orRoot(path), line)
	case line < 0 && s != nil && -line-1 < len(s.sets):
		k := -line - 1
		if path == s.paths[k] {
			return s.sets[k].label()
		}
		return s.sets[k].label() + ": " + orRoot(path)
	}
	return orRoot(path)
}

// where is at for the line of path or, when the file does not give path,
// of its nearest parent.
func (s *source) where(path string) string {
	if s == nil {
		return orRoot(path)
	}
	return s.at(path, lineOf(s.lines, path))
}

// given reports whether the file or an override gave the key at path.
func (s *source) given(path string) bool {
	if s == nil {
		return false
	}
	_, ok := s.lines[path]
	return ok
}

func (s *source) record(path string, line int) {
	if s != nil && s.lines != nil {
		s.lines[path] = line
	}
}

// apply applies the overrides to the document root, in order.
func (s *source) apply(root *yaml.Node) error {
	if root.Kind == 0 { // an empty file
		*root = yaml.Node{Kind: yaml.DocumentNode}
	}
	if len(root.Content) == 0 {
		root.Content = []*yaml.Node{{Kind: yaml.MappingNode}}
	}
	s.paths = make([]string, len(s.sets))
	for k, set := range s.sets {
		path, err := set.apply(&root.Content[0], -(k + 1))
		if err != nil {
			return fmt.Errorf("%s: %w", set.label(), err)
		}
		s.paths[k] = path
	}
	return nil
}

// apply puts a copy of the set's value at its key under *slot, the
// document's top-level mapping, marking every node it adds with line; it
// returns the key path it set, with [name] selectors as indexes.
func (set Set) apply(slot **yaml.Node, line int) (string, error) {
	path := ""
	for i, st := range set.steps {
		n := own(slot)
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			*n = yaml.Node{Kind: yaml.MappingNode, Line: line}
		}
		if n.Kind != yaml.MappingNode {
			return "", fmt.Errorf("%s is %s%s, not a mapping with a key %s", orRoot(path), describe(n), lineNote(n), st.key)
		}
		path = join(path, st.key)
		slot = nil
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == st.key {
				slot = &n.Content[j+1]
				if i == len(set.steps)-1 && len(st.sel) == 0 {
					n.Content[j].Line = line // the key's value is the override's now
				}
				break
			}
		}
		if slot == nil {
			if len(st.sel) > 0 {
				return "", fmt.Errorf("%s is not in the config, so it has no entry %s; set the whole list (--set '%s=[...]')", path, "["+st.sel[0]+"]", path)
			}
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: st.key, Line: line},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: line})
			slot = &n.Content[len(n.Content)-1]
		}
		for _, sel := range st.sel {
			list := own(slot)
			if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
				return "", fmt.Errorf("%s is empty%s, so it has no entry [%s]; set the whole list (--set '%s=[...]')", path, lineNote(list), sel, path)
			}
			if list.Kind != yaml.SequenceNode {
				return "", fmt.Errorf("%s is %s%s, not a list", path, describe(list), lineNote(list))
			}
			idx, err := selectEntry(list, path, sel)
			if err != nil {
				return "", err
			}
			path = fmt.Sprintf("%s[%d]", path, idx)
			slot = &list.Content[idx]
		}
	}
	v := copyNode(set.value)
	mark(v, line)
	*slot = v
	return path, nil
}

// selectEntry finds the entry of list that sel names: an index, or the
// name of an entry with a name key.
func selectEntry(list *yaml.Node, path, sel string) (int, error) {
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(list.Content) {
			switch len(list.Content) {
			case 0:
				return 0, fmt.Errorf("%s is an empty list", path)
			case 1:
				return 0, fmt.Errorf("%s has 1 entry, %s[0]", path, path)
			}
			return 0, fmt.Errorf("%s has %d entries, %s[0] to %s[%d]", path, len(list.Content), path, path, len(list.Content)-1)
		}
		return i, nil
	}
	var names []string
	for i, e := range list.Content {
		if e.Kind == yaml.AliasNode {
			e = e.Alias
		}
		if e.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(e.Content); j += 2 {
			if e.Content[j].Value == "name" {
				if e.Content[j+1].Value == sel {
					return i, nil
				}
				names = append(names, e.Content[j+1].Value)
			}
		}
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("%s has no entry named %q (its entries have no name key: give an index)", path, sel)
	}
	return 0, fmt.Errorf("%s has no entry named %q; names: %s", path, sel, strings.Join(names, ", "))
}

// own makes the node at *slot one the override may change: an alias, or an
// anchored node, is replaced by a copy of what it stands for, so that the
// override does not change the other places that refer to the same anchor
// (they keep the original).
func own(slot **yaml.Node) *yaml.Node {
	switch {
	case (*slot).Kind == yaml.AliasNode:
		*slot = copyNode((*slot).Alias)
		(*slot).Anchor = ""
	case (*slot).Anchor != "":
		*slot = copyNode(*slot)
		(*slot).Anchor = ""
	}
	return *slot
}

func copyNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = copyNode(e)
	}
	return &c
}

// mark sets the line of n and every node below it.
func mark(n *yaml.Node, line int) {
	n.Line = line
	for _, c := range n.Content {
		mark(c, line)
	}
}

func lineNote(n *yaml.Node) string {
	if n.Line > 0 {
		return fmt.Sprintf(" (line %d)", n.Line)
	}
	return ""
}

// didYouMean is "; did you mean X?" for the valid key closest to key, when
// one is close enough to be a likely typo, else "".
func didYouMean(key string, valid []string) string {
	if best := suggest.Closest(key, valid); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// SetFlag is the --set flag that gives arg (KEY=VALUE), quoted for a POSIX
// shell where it needs to be: --set steps=100, --set 'agents[0].optimizer.lr=2e-4'.
func SetFlag(arg string) string {
	plain := arg != ""
	for _, r := range arg {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.=+/:,@%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return "--set " + arg
	}
	return "--set '" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}
