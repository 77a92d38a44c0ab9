package backend

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gomlx/compute"
)

// TestNewPrintsNothing creates Go backends with and without a parallelism
// option and checks that nothing reaches standard output (the commands print
// JSON there) and that the option still takes effect.
func TestNewPrintsNothing(t *testing.T) {
	tests := []struct {
		config      string
		parallelism int // want; 0: do not check
		err         string
	}{
		{config: "go:parallelism=-1", parallelism: -1},
		{config: "go:parallelism=3,ops_sequential", parallelism: 3},
		{config: "go:ops_sequential,parallelism=5", parallelism: 5},
		{config: "go:ops_sequential"},
		{config: "go:parallelism=many", err: "parallelism=many: want an integer"},
		{config: "go:no_such_option", err: "no_such_option"},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			var b compute.Backend
			var err error
			out := captureStdout(t, func() { b, err = create(tt.config) })
			if out != "" {
				t.Errorf("create(%q) wrote %q on standard output", tt.config, out)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("create(%q) error = %v, want one containing %q", tt.config, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w, err := goWorkers(b)
			if err != nil {
				t.Fatal(err)
			}
			if tt.parallelism != 0 && w.MaxParallelism() != tt.parallelism {
				t.Errorf("create(%q): parallelism %d, want %d", tt.config, w.MaxParallelism(), tt.parallelism)
			}
		})
	}
}

// captureStdout runs f with os.Stdout redirected to a pipe and returns what
// it wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	f()
	os.Stdout = saved
	w.Close()
	return <-done
}
