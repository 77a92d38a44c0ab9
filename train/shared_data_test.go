package train

import (
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/task"
)

// TestDatasetByName trains on a shared data set named in dataset.path.
func TestDatasetByName(t *testing.T) {
	tests := []struct {
		d        config.Dataset
		problems int
		err      string
	}{
		{d: config.Dataset{Path: "math_train", PromptSuffix: dataset.MathSuffix}, problems: 7498},
		{d: config.Dataset{Path: "aime25"}, problems: 30},
		{d: config.Dataset{Path: "math_train", AnswerField: "answer"}, err: "dataset.path: math_train names a shared data set"},
		{d: config.Dataset{Path: "math_training"}, err: "unknown format"},
	}
	for _, tt := range tests {
		t.Run(tt.d.Path, func(t *testing.T) {
			tk, err := loadDataset(&tt.d)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := task.Len(tk, task.Train); n != tt.problems {
				t.Errorf("%d training problems, want %d", n, tt.problems)
			}
			if n, _ := task.Len(tk, task.Test); n != 0 {
				t.Errorf("%d test problems, want 0", n)
			}
			if p := tk.Problem(task.Train, 0); !strings.HasSuffix(p.Question, tt.d.PromptSuffix) || p.Answer == "" {
				t.Errorf("first problem %+v", p)
			}
		})
	}
}
