// Package refdoc generates the config reference, docs/config.md, from the
// config package itself: the keys and types by reflection over config.Config
// and config.SFT, each key's meaning from its field's doc comment in the
// package's source, its default from the field's default or derived tag (the
// tags the package applies), and the defaults that live in other packages
// (method presets, task options, backend) by resolving configs with
// train.Resolve.
package refdoc

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/train"
)

// Docs are the doc comments of a package's struct types: type name → field
// name → text, and type name → the type's own doc under the key "".
type Docs map[string]map[string]string

// ReadDocs parses the non-test Go files in dir and collects the doc comments
// of every struct type's fields (the comment above a field, or else the one
// after it on its line).
func ReadDocs(dir string) (Docs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	docs := Docs{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				m := map[string]string{"": text(ts.Doc, g.Doc)}
				for _, field := range st.Fields.List {
					for _, name := range field.Names {
						m[name.Name] = text(field.Doc, field.Comment)
					}
				}
				docs[ts.Name.Name] = m
			}
		}
	}
	return docs, nil
}

// text is the first non-empty comment group's text on one line.
func text(groups ...*ast.CommentGroup) string {
	for _, g := range groups {
		if t := strings.Join(strings.Fields(g.Text()), " "); t != "" {
			return t
		}
	}
	return ""
}

// Row is one key of the reference.
type Row struct {
	Path, Type, Default, Meaning string
	// Owner and Field name the struct field the key comes from.
	Owner, Field string
}

// Rows lists every key of the config type t (config.Config or config.SFT),
// depth first in declaration order, with list elements written "key[]".
func Rows(t reflect.Type, docs Docs) []Row {
	var rows []Row
	walk(t, "", docs, &rows)
	return rows
}

func walk(t reflect.Type, prefix string, docs Docs, rows *[]Row) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		path := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		r := Row{Path: path, Type: typeName(ft), Meaning: docs[t.Name()][f.Name], Owner: t.Name(), Field: f.Name}
		if d, ok := f.Tag.Lookup("default"); ok {
			r.Default = code(d)
		} else if d, ok := f.Tag.Lookup("derived"); ok {
			r.Default = escape(d)
		}
		*rows = append(*rows, r)
		switch {
		case ft.Kind() == reflect.Struct:
			walk(ft, path+".", docs, rows)
		case ft.Kind() == reflect.Slice && elem(ft).Kind() == reflect.Struct:
			walk(elem(ft), path+"[].", docs, rows)
		}
	}
}

func elem(t reflect.Type) reflect.Type {
	t = t.Elem()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "mapping"
	case reflect.Map:
		return "mapping of names to values"
	case reflect.Slice:
		return "list of " + typeName(elem(t)) + "s"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer ≥ 0"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	}
	return t.String()
}

// Undocumented lists the keys whose fields have no doc comment, as
// "Type.Field (key)".
func Undocumented(docs Docs) []string {
	var out []string
	for _, t := range []reflect.Type{reflect.TypeOf(config.Config{}), reflect.TypeOf(config.SFT{})} {
		for _, r := range Rows(t, docs) {
			if r.Meaning == "" {
				out = append(out, fmt.Sprintf("config.%s.%s (%s)", r.Owner, r.Field, r.Path))
			}
		}
	}
	sort.Strings(out)
	return slicesCompact(out)
}

func slicesCompact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// escape makes text safe in a Markdown table cell.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", "*", `\*`).Replace(s)
}

// code is s as code in a Markdown table cell.
func code(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }

// meaning is a field's doc comment for the reference: a leading Go field
// name ("TopP is nucleus sampling") becomes the key ("`top_p` is ...").
func meaning(r Row) string {
	key := r.Path[strings.LastIndexAny(r.Path, ".]")+1:]
	if rest, ok := strings.CutPrefix(r.Meaning, r.Field+" "); ok {
		return code(key) + " " + escape(rest)
	}
	return escape(r.Meaning)
}

// Generate returns docs/config.md for the config package whose sources are
// in dir. It fails when an exported field of a config type has no doc
// comment.
func Generate(dir string) ([]byte, error) {
	docs, err := ReadDocs(dir)
	if err != nil {
		return nil, err
	}
	if missing := Undocumented(docs); len(missing) > 0 {
		return nil, fmt.Errorf("config fields without a doc comment: %s", strings.Join(missing, ", "))
	}
	var b bytes.Buffer
	b.WriteString(header)
	section(&b, "Run config (`hacrl train`)", reflect.TypeOf(config.Config{}), docs)
	section(&b, "Warm-start config (`hacrl sft`)", reflect.TypeOf(config.SFT{}), docs)
	if err := elsewhere(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

const header = `# Config reference

<!-- Generated by ` + "`go generate ./config`" + ` (config/internal/gendoc) from the config
package's types, doc comments and default tags. Do not edit: a test fails when this file and the
code differ. -->

Configs are YAML. Decoding is strict: an unknown key, a value of the wrong type or an impossible
combination fails before any work starts, naming the key's path and line
(` + "`agents[1].sampling.top_p (line 23): must be in (0, 1], got 1.5`" + `).

- A key left out, or given no value (` + "`key: ~`" + `), takes its default. A key given a value keeps it:
  where a default is listed, the key's zero (` + "`0`" + `, ` + "`\"\"`" + `) is not a value it can be given
  (` + "`top_p: 0`" + ` fails: "must not be 0; leave the key out for the default (1)"), except where the
  meaning below gives the zero a meaning of its own: ` + "`temperature: 0`" + ` is greedy decoding,
  ` + "`max_grad_norm: 0`" + ` turns clipping off, ` + "`weight_decay: 0`" + ` turns decay off.
- Integers must be whole numbers (` + "`steps: 2.5`" + ` fails; ` + "`1e3`" + ` is 1000) and numbers finite.
- ` + "`hacrl train --print-defaults CONFIG`" + ` prints the config with every default filled in, the
  method preset's hyperparameters and the task's options included; a run records the same text in
  ` + "`OUT/config.yaml`" + `, which loads back as the same config.

A default in ` + "`code`" + ` is a literal value; otherwise it says how the value is derived.
`

func section(b *bytes.Buffer, title string, t reflect.Type, docs Docs) {
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n", title, escape(docs[t.Name()][""]))
	b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
	for _, r := range Rows(t, docs) {
		def := r.Default
		if def == "" {
			def = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", code(r.Path), r.Type, def, meaning(r))
	}
}

// elsewhere writes the defaults that live outside package config, as
// train.Resolve fills them in.
func elsewhere(b *bytes.Buffer) error {
	b.WriteString("\n## Defaults from other packages\n\n")
	b.WriteString("### Method presets (`method.name`)\n\nThe values the other `method` keys take when left out:\n\n")
	// Tables of at most presetColumns keys each, so that each stays readable.
	const presetColumns = 11
	all := derivedKeys(reflect.TypeOf(config.Method{}))
	for lo := 0; lo < len(all); lo += presetColumns {
		keys := all[lo:min(lo+presetColumns, len(all))]
		if lo > 0 {
			b.WriteString("\n")
		}
		b.WriteString("| preset |")
		for _, k := range keys {
			fmt.Fprintf(b, " %s |", code(k.name))
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(keys)) + "\n")
		for _, name := range hacpo.PresetNames() {
			r, err := train.Resolve(&config.Config{Method: config.Method{Name: name}})
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "| %s |", name)
			for _, k := range keys {
				fmt.Fprintf(b, " %s |", code(value(reflect.ValueOf(r.Method).Field(k.index))))
			}
			b.WriteString("\n")
		}
	}

	b.WriteString("\n### Task options (`task`)\n\nThe values a generated task's options take when left out:\n\n| task | options |\n|---|---|\n")
	tt := reflect.TypeOf(config.Task{})
	for _, name := range task.Names() {
		r, err := train.Resolve(&config.Config{Method: config.Method{Name: "hacpo"}, Task: &config.Task{Name: name}})
		if err != nil {
			return err
		}
		var opts []string
		v := reflect.ValueOf(*r.Task)
		for i := 0; i < tt.NumField(); i++ {
			f := tt.Field(i)
			if f.Tag.Get("task") == name {
				yamlKey, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				opts = append(opts, code(fmt.Sprintf("%s: %s", yamlKey, value(v.Field(i)))))
			}
		}
		fmt.Fprintf(b, "| %s | %s |\n", name, strings.Join(opts, ", "))
	}

	fmt.Fprintf(b, "\n### Backend (`backend`)\n\n`%s`; the `GOMLX_BACKEND` environment variable overrides the config.\n", backend.Default)
	return nil
}

type key struct {
	name  string
	index int
}

// derivedKeys are the fields of struct type t whose derived default is the
// preset's.
func derivedKeys(t reflect.Type) []key {
	var out []key
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		// A preset fills the keys whose derived default names it (semantics,
		// v1 for every preset, is left unset so that configs keep their hash).
		if d, ok := f.Tag.Lookup("derived"); ok && strings.Contains(d, "preset") {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			out = append(out, key{name, i})
		}
	}
	return out
}

func value(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "—"
		}
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface())
}

// Write generates the reference for the config package in dir and writes it
// to path.
func Write(dir, path string) error {
	data, err := Generate(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
