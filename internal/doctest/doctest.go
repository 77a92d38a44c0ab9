// Package doctest finds the shell commands that Markdown documentation tells
// users to run, so that a test can run them and docs and code cannot drift.
//
//	blocks, err := doctest.Parse("README.md", src)
//	for _, b := range blocks {
//		if !b.Shell() {
//			continue // an output listing, YAML, Python…
//		}
//		for _, c := range b.Commands {
//			fmt.Println(c.Line, c.Flat(), c.Comment)
//		}
//	}
//
// Parse returns every fenced code block (``` or ~~~, indented or not, as in
// CommonMark) with its info string's first word as Lang. A block whose Lang
// names a shell (sh, bash, shell, zsh, console) is split into commands the way
// bash reads it: a command ends at a newline outside quotes; a backslash
// before the newline, or a quote still open, continues it on the next line; a
// # that begins a word outside quotes starts a comment. Comment-only lines
// after a command are kept as its Notes (they often show what it prints).
// Here-documents are not understood: a block that uses one is an error.
//
// InlineCode returns the backtick code spans of the text outside fenced
// blocks (usage lines such as `hacrl eval CHECKPOINT --set NAME`), with
// line breaks inside a span read as spaces.
//
// CopyTracked copies a git working tree's tracked (and untracked but not
// ignored) files to a fresh directory: the files a clone has, so commands can
// run without writing into the working tree.
package doctest

import (
	"fmt"
	"strings"
)

// A Block is one fenced code block.
type Block struct {
	File     string    // the name given to Parse
	Line     int       // 1-based line of the opening fence
	Lang     string    // the info string's first word, lower case ("" for none)
	Lines    []string  // the contents, the fence's indentation removed
	Commands []Command // for a shell block, its commands in order
}

// Shell reports whether the block's language is a shell's.
func (b Block) Shell() bool {
	switch b.Lang {
	case "sh", "bash", "shell", "zsh", "console":
		return true
	}
	return false
}

// A Command is one command of a shell block as a user would paste it.
type Command struct {
	Line    int      // 1-based line in the file where it starts
	Text    string   // the command as written, trailing comment removed; a multi-line command keeps its line breaks
	Comment string   // its trailing comment without the #, trimmed ("" for none)
	Notes   []string // comment-only lines right after it, without the #, trimmed
}

// Flat returns the command on one line: continuation lines joined and runs of
// blanks made one space (quoted text included, so it is for reading and
// matching, not for running).
func (c Command) Flat() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(c.Text, "\\\n", " ")), " ")
}

// Background reports whether the command ends with & (runs in the
// background).
func (c Command) Background() bool {
	t := strings.TrimSpace(c.Text)
	return strings.HasSuffix(t, "&") && !strings.HasSuffix(t, "&&")
}

// Parse returns the fenced code blocks of the Markdown source src, read from
// the file name (used in errors and in each Block). It is an error for a
// fence to stay open at the end, or for a shell block to end inside a quote
// or use a here-document.
func Parse(name string, src []byte) ([]Block, error) {
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		indent, fence, info, ok := openFence(lines[i])
		if !ok {
			continue
		}
		b := Block{File: name, Line: i + 1}
		if f := strings.Fields(info); len(f) > 0 {
			b.Lang = strings.ToLower(f[0])
		}
		closed := false
		for i++; i < len(lines); i++ {
			if isCloseFence(lines[i], fence) {
				closed = true
				break
			}
			b.Lines = append(b.Lines, dedent(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the code block opened by %s is never closed", name, b.Line, fence)
		}
		if b.Shell() {
			cmds, err := splitCommands(b.Lines, b.Line+1)
			if err != nil {
				return nil, fmt.Errorf("%s:%w", name, err)
			}
			b.Commands = cmds
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// openFence reads a line that opens a fenced block: its indentation, the
// fence (``` or ~~~, three or more) and the info string.
func openFence(line string) (indent int, fence, info string, ok bool) {
	rest := strings.TrimLeft(line, " \t")
	indent = len(line) - len(rest)
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(rest) && rest[n] == c {
			n++
		}
		if n < 3 {
			continue
		}
		info = strings.TrimSpace(rest[n:])
		if c == '`' && strings.Contains(info, "`") {
			return 0, "", "", false // an inline code span, not a fence
		}
		return indent, rest[:n], info, true
	}
	return 0, "", "", false
}

// isCloseFence reports whether line closes a block opened by fence: a run of
// the same character at least as long, and nothing else.
func isCloseFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// dedent removes up to n leading blanks.
func dedent(line string, n int) string {
	i := 0
	for i < n && i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[i:]
}

// splitCommands splits a shell block's lines into commands; first is the
// file line of lines[0].
func splitCommands(lines []string, first int) ([]Command, error) {
	var (
		cmds  []Command
		cur   *Command
		text  strings.Builder
		quote byte // ' or " while inside quotes
		start int  // file line of the command or quote being read
	)
	finish := func(comment string) {
		cur.Text = strings.TrimRight(text.String(), " \t")
		cur.Comment = comment
		cmds = append(cmds, *cur)
		cur = nil
		text.Reset()
	}
	for k, line := range lines {
		lineNo := first + k
		if cur == nil {
			t := strings.TrimSpace(line)
			if t == "" {
				continue
			}
			if strings.HasPrefix(t, "#") {
				if len(cmds) > 0 && k > 0 && strings.TrimSpace(lines[k-1]) != "" {
					last := &cmds[len(cmds)-1]
					last.Notes = append(last.Notes, strings.TrimSpace(t[1:]))
				}
				continue
			}
			cur = &Command{Line: lineNo}
			start = lineNo
			line = strings.TrimLeft(line, " \t")
		}
		comment, cont := "", false
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote == '\'':
				if c == '\'' {
					quote = 0
				}
			case c == '\\' && i+1 == len(line):
				cont = true // a backslash before the newline continues the line
				continue
			case c == '\\':
				text.WriteByte(c)
				i++
				c = line[i]
			case quote == '"':
				if c == '"' {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote, start = c, lineNo
			case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
				comment = strings.TrimSpace(line[i+1:])
				i = len(line)
				continue
			case c == '<' && strings.HasPrefix(line[i:], "<<") && !strings.HasPrefix(line[i:], "<<<"):
				return nil, fmt.Errorf("%d: a here-document (<<), which doctest does not read", lineNo)
			}
			text.WriteByte(c)
		}
		switch {
		case cont:
			text.WriteString("\\\n")
		case quote != 0:
			text.WriteByte('\n')
		default:
			finish(comment)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%d: the quote %c opened here is never closed in its code block", start, quote)
	}
	if cur != nil {
		return nil, fmt.Errorf("%d: the code block ends inside the command that starts here (a trailing backslash?)", cur.Line)
	}
	return cmds, nil
}

// A Span is an inline code span of Markdown text.
type Span struct {
	Line int    // 1-based line of its opening backticks
	Text string // its contents, line breaks read as spaces, one leading and trailing space stripped as CommonMark does
}

// InlineCode returns the backtick code spans of src outside fenced code
// blocks, in order. A span may cross line breaks but not a blank line.
func InlineCode(src []byte) []Span {
	lines := strings.Split(strings.ReplaceAll(string(src), "\r\n", "\n"), "\n")
	var spans []Span
	var para []string // the lines of the current paragraph
	paraStart := 0
	flush := func() {
		spans = append(spans, spansOf(para, paraStart)...)
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		if _, fence, _, ok := openFence(lines[i]); ok {
			flush()
			for i++; i < len(lines) && !isCloseFence(lines[i], fence); i++ {
			}
			continue
		}
		if strings.TrimSpace(lines[i]) == "" {
			flush()
			continue
		}
		if para == nil {
			paraStart = i + 1
		}
		para = append(para, lines[i])
	}
	flush()
	return spans
}

// spansOf returns the code spans of one paragraph whose first line is
// file line first.
func spansOf(para []string, first int) []Span {
	text := strings.Join(para, "\n")
	lineAt := func(off int) int { return first + strings.Count(text[:off], "\n") }
	run := func(i int) int { // length of the backtick run at i
		n := 0
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		return n
	}
	var spans []Span
	for i := 0; i < len(text); {
		if text[i] == '\\' {
			i += 2 // an escaped character, a backtick included
			continue
		}
		if text[i] != '`' {
			i++
			continue
		}
		n := run(i)
		end := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			if m := run(j); m == n {
				end = j
				break
			} else {
				j += m
			}
		}
		if end < 0 {
			i += n // no closing run: literal backticks
			continue
		}
		s := strings.ReplaceAll(text[i+n:end], "\n", " ")
		if len(s) > 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "" {
			s = s[1 : len(s)-1]
		}
		spans = append(spans, Span{Line: lineAt(i), Text: s})
		i = end + n
	}
	return spans
}
