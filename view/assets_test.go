package view_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAssetsRules checks the page's files for what the browser test cannot
// see on one run: no text is ever parsed as HTML (a run's responses are
// model output), every URL is relative (so the page works behind the
// /?key= cookie and any path prefix), and nothing is fetched from
// elsewhere (no CDN, web font or remote script).
func TestAssetsRules(t *testing.T) {
	rules := []struct {
		re   *regexp.Regexp
		why  string
		exts string // the file kinds the rule applies to
	}{
		{regexp.MustCompile(`\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser`),
			"parses text as HTML; build elements with el (dom.js), which makes text nodes", ".js"},
		{regexp.MustCompile(`https?://|['"(]//[a-z]`), "a URL of another site: the page fetches nothing from elsewhere", ".js .html .css"},
		{regexp.MustCompile("[\"'`(]/(api|assets)/"), "an absolute path: URLs are relative (api/…, assets/…)", ".js .html .css"},
		{regexp.MustCompile(`@import|@font-face|url\(`), "loads a style sheet, font or image", ".css"},
	}
	files, err := filepath.Glob(filepath.Join("assets", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("assets: %q, want the page's files (index.html, app.js, style.css …)", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "//") || strings.HasPrefix(trimmed, "<!--") || strings.HasPrefix(trimmed, "/*") {
				continue // comments may name what the code must not do
			}
			for _, r := range rules {
				if strings.Contains(r.exts, filepath.Ext(f)) && r.re.MatchString(line) {
					t.Errorf("%s:%d: %s: %s", f, n+1, r.why, trimmed)
				}
			}
		}
	}
}
