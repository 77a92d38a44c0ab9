package tokenizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// CorpusFromFiles reads training text for TrainBPE. A file ending in
// ".jsonl" holds one JSON object per line, and each string field of each
// object (in key order) is one document; any other file is text, and each
// non-empty line is one document. Errors name the file and line.
func CorpusFromFiles(paths ...string) ([]string, error) {
	var corpus []string
	for _, path := range paths {
		var err error
		corpus, err = appendFile(corpus, path)
		if err != nil {
			return nil, err
		}
	}
	return corpus, nil
}

func appendFile(corpus []string, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: corpus: %w", err)
	}
	defer f.Close()
	jsonl := strings.HasSuffix(path, ".jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if !jsonl {
			corpus = append(corpus, text)
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			return nil, fmt.Errorf("tokenizer: corpus %s:%d: want a JSON object: %w", path, line, err)
		}
		keys := make([]string, 0, len(obj))
		for k, v := range obj {
			if _, ok := v.(string); ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s := obj[k].(string); s != "" {
				corpus = append(corpus, s)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer: corpus %s: %w", path, err)
	}
	return corpus, nil
}
