package doctest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []Block // File is always "f.md"
	}{
		{"shell and output blocks", "text\n```sh\nhacrl train a.yaml\n```\n\n```\nagent  metric\n```\n",
			[]Block{
				{Line: 2, Lang: "sh", Lines: []string{"hacrl train a.yaml"}, Commands: []Command{{Line: 3, Text: "hacrl train a.yaml"}}},
				{Line: 6, Lines: []string{"agent  metric"}},
			}},
		{"trailing comments, quotes and notes", "```bash\n" +
			"hacrl generate x \"12+37\"   # greedy: #### 49\n" +
			"curl -d '{\"a\":\"#### 4\"}' x#y\n" +
			"# {\"rewards\":[]}\n" +
			"\n" +
			"# a comment before a command is no note\n" +
			"echo \"a # b\" \\# c\n" +
			"```",
			[]Block{{Line: 1, Lang: "bash",
				Lines: []string{`hacrl generate x "12+37"   # greedy: #### 49`, `curl -d '{"a":"#### 4"}' x#y`, `# {"rewards":[]}`, "", "# a comment before a command is no note", `echo "a # b" \# c`},
				Commands: []Command{
					{Line: 2, Text: `hacrl generate x "12+37"`, Comment: "greedy: #### 49"},
					{Line: 3, Text: `curl -d '{"a":"#### 4"}' x#y`, Notes: []string{`{"rewards":[]}`}},
					{Line: 7, Text: `echo "a # b" \# c`},
				}}}},
		{"continuation lines and a background command", "- a list item:\n   ```sh\n   hacrl bus --store d \\\n     --tls x   # comment\n   hacrl serve ck &\n   ```\n",
			[]Block{{Line: 2, Lang: "sh",
				Lines: []string{`hacrl bus --store d \`, "  --tls x   # comment", "hacrl serve ck &"},
				Commands: []Command{
					{Line: 3, Text: "hacrl bus --store d \\\n  --tls x", Comment: "comment"},
					{Line: 5, Text: "hacrl serve ck &"},
				}}}},
		{"a quote across lines", "```sh\necho 'a\nb # c' d\n```",
			[]Block{{Line: 1, Lang: "sh", Lines: []string{"echo 'a", "b # c' d"},
				Commands: []Command{{Line: 2, Text: "echo 'a\nb # c' d"}}}}},
		{"tildes, a longer fence and info words", "~~~~ Shell title=x\n```\nls\n~~~~\n",
			[]Block{{Line: 1, Lang: "shell", Lines: []string{"```", "ls"},
				Commands: []Command{{Line: 2, Text: "```"}, {Line: 3, Text: "ls"}}}}},
		{"inline code is no fence", "a ```x``` b\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("f.md", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].File = "f.md"
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a\n```sh\nls\n", "f.md:2: the code block opened by ``` is never closed"},
		{"```sh\necho 'a\n```", "f.md:2: the quote ' opened here is never closed in its code block"},
		{"```sh\nls \\\n```", "f.md:2: the code block ends inside the command that starts here"},
		{"```sh\ncat <<EOF\nx\nEOF\n```", "f.md:2: a here-document (<<)"},
	} {
		_, err := Parse("f.md", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%q): error %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestCommandFlatAndBackground(t *testing.T) {
	for _, tc := range []struct {
		text, flat string
		bg         bool
	}{
		{"hacrl bus \\\n  --tls x", "hacrl bus --tls x", false},
		{"hacrl serve ck &", "hacrl serve ck &", true},
		{"a && b", "a && b", false},
	} {
		c := Command{Text: tc.text}
		if c.Flat() != tc.flat || c.Background() != tc.bg {
			t.Errorf("%q: Flat %q, Background %v; want %q, %v", tc.text, c.Flat(), c.Background(), tc.flat, tc.bg)
		}
	}
}

func TestInlineCode(t *testing.T) {
	src := "Run `hacrl eval CKPT --set NAME` or ``a ` b``; `hacrl train\n--processes` too.\n" +
		"```sh\n`not a span`\n```\n" +
		"An unclosed ` backtick.\n\nAnd \\`escaped\\` ones.\n\n| `x \\| y` |\n"
	want := []Span{
		{Line: 1, Text: "hacrl eval CKPT --set NAME"},
		{Line: 1, Text: "a ` b"},
		{Line: 1, Text: "hacrl train --processes"},
		{Line: 10, Text: `x \| y`},
	}
	if got := InlineCode([]byte(src)); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestCopyTracked(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		".gitignore":   "*.log\n",
		"a.sh":         "echo a\n", // tracked, executable
		"sub/b.txt":    "b",        // untracked, not ignored
		"sub/c.log":    "c",        // ignored
		"gone.txt":     "x",        // tracked, then deleted
		"sub/deep/d.x": "d",        // tracked
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "a.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.sh", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore", "a.sh", "gone.txt", "sub/deep/d.x", "link"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Remove(filepath.Join(src, "gone.txt")); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "copy")
	if err := CopyTracked(src, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dst, path)
			got = append(got, rel)
		}
		return err
	})
	if want := []string{".gitignore", "a.sh", "link", "sub/b.txt", "sub/deep/d.x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("copied %q, want %q", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("a.sh: %v, %v; want mode 0755", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "a.sh" {
		t.Errorf("link: %q, %v; want a link to a.sh", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub/deep/d.x")); err != nil || string(b) != "d" {
		t.Errorf("sub/deep/d.x: %q, %v", b, err)
	}

	if err := CopyTracked(t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "git ls-files") {
		t.Errorf("outside a git tree: error %v, want git ls-files's", err)
	}
}
