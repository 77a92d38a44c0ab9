package train

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/dataset"
	"github.com/hacrl/hacrl/task"
)

type randSource = rand.Rand

// Summary is what a finished (or interrupted) run reports.
type Summary struct {
	Steps   int // steps done in all
	Elapsed time.Duration
	// Resumed is the step this invocation started from (0 for a new run).
	Resumed int
	// AlreadyComplete says the run had done its steps before this invocation
	// (a resume of a finished run): nothing was trained.
	AlreadyComplete bool
	// Eval[agent][key] at the first and the latest evaluation (keys eval/<set>/<metric>).
	First, Last map[string]map[string]float64
	// FirstStep and LastStep are the steps of First and Last; −1 when
	// unknown (resumed from a checkpoint that did not record them).
	FirstStep, LastStep int
	Agents              []string
}

func (r *Run) summary(steps int, elapsed time.Duration) *Summary {
	s := &Summary{Steps: steps, Elapsed: elapsed, Resumed: r.start, First: r.firstEval, Last: r.lastEval,
		FirstStep: r.firstEvalStep, LastStep: r.lastEvalStep}
	for _, a := range r.agents {
		s.Agents = append(s.Agents, a.Name)
	}
	return s
}

// String is the final table: every evaluation metric per agent, at the first
// and at the latest evaluation, which after an interrupt may be before the
// last step done.
func (s *Summary) String() string {
	var b strings.Builder
	switch {
	case s.AlreadyComplete:
		fmt.Fprintf(&b, "run already complete at step %d: nothing to train (raise steps to go on)\n", s.Steps)
	case s.Resumed > 0:
		fmt.Fprintf(&b, "%d steps in %s (resumed at step %d)\n", s.Steps, s.Elapsed.Round(time.Second), s.Resumed)
	default:
		fmt.Fprintf(&b, "%d steps in %s\n", s.Steps, s.Elapsed.Round(time.Second))
	}
	if len(s.Last) == 0 {
		b.WriteString("no evaluation\n")
		return b.String()
	}
	known := s.FirstStep >= 0 && s.LastStep >= 0
	once := known && s.FirstStep == s.LastStep
	startCol, endCol := "start", "end"
	if known {
		startCol, endCol = fmt.Sprintf("step %d", s.FirstStep), fmt.Sprintf("step %d", s.LastStep)
	}
	if once {
		fmt.Fprintf(&b, "one evaluation, at step %d", s.FirstStep)
		if s.LastStep < s.Steps {
			fmt.Fprintf(&b, " (none in the %d steps since)", s.Steps-s.LastStep)
		}
		b.WriteByte('\n')
		fmt.Fprintf(&b, "%-16s %-28s %8s\n", "agent", "metric", startCol)
	} else {
		fmt.Fprintf(&b, "%-16s %-28s %8s %8s %8s\n", "agent", "metric", startCol, endCol, "change")
	}
	for _, a := range s.Agents {
		last := s.Last[a]
		keys := make([]string, 0, len(last))
		for k := range last {
			if strings.HasPrefix(k, "eval/") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := strings.TrimPrefix(k, "eval/")
			start, ok := s.First[a][k]
			switch {
			case once:
				fmt.Fprintf(&b, "%-16s %-28s %8.3f\n", a, name, last[k])
			case ok:
				fmt.Fprintf(&b, "%-16s %-28s %8.3f %8.3f %+8.3f\n", a, name, start, last[k], last[k]-start)
			default:
				fmt.Fprintf(&b, "%-16s %-28s %8s %8.3f %8s\n", a, name, "-", last[k], "")
			}
		}
	}
	return b.String()
}

// buildEvalSets resolves the config's evaluation sets against the task.
func buildEvalSets(cfg *config.Config, t task.Task) ([]*evalSet, error) {
	var out []*evalSet
	for i, sc := range cfg.Eval.Sets {
		p := fmt.Sprintf("eval.sets[%d]", i)
		es := &evalSet{cfg: sc, task: t}
		var err error
		key := p
		switch {
		case sc.Benchmark != "":
			key = p + ".benchmark"
			var d *dataset.Dataset
			if d, err = dataset.Benchmark(sc.Benchmark); err == nil {
				es.task = d
				if sc.PromptSuffix != "" {
					es.task = d.WithSuffix(sc.PromptSuffix)
				}
			}
		case sc.Dataset != "":
			key = p + ".dataset"
			es.task, err = DatasetTask(sc.Dataset, dataset.Options{}, sc.PromptSuffix, task.Test)
		case sc.Task != nil:
			if cfg.Task == nil {
				return nil, fmt.Errorf("%s: only for a run with a generated task", cfg.Where(p+".task"))
			}
			o := cfg.Task.Override(sc.Task)
			if es.task, err = newTask(&o); err != nil {
				return nil, taskError(cfg, p+".task", err)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Where(key), err)
		}
		split := task.Test
		if sc.Split == "train" {
			split = task.Train
		}
		n, finite := task.Len(es.task, split)
		if sc.Problems > 0 && (!finite || sc.Problems < n) {
			n = sc.Problems
		}
		if !finite && sc.Problems <= 0 {
			return nil, fmt.Errorf("%s: required for the generated task %s", cfg.Where(p+".problems"), t.Name())
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: the %s split of %s has no problems", cfg.Where(p+".split"), split, es.task.Name())
		}
		for j := range n {
			es.problems = append(es.problems, es.task.Problem(split, j))
		}
		out = append(out, es)
	}
	return out, nil
}

func loadDataset(d *config.Dataset) (task.Task, error) {
	if dataset.IsShared(d.Path) {
		return sharedTrainTask(d)
	}
	if ext := filepath.Ext(d.Path); ext != ".jsonl" && ext != ".parquet" {
		return nil, fmt.Errorf("%s is neither a .jsonl or .parquet file nor a shared data set (%s)", d.Path, strings.Join(dataset.Benchmarks(), ", "))
	}
	return DatasetTask(d.Path, dataset.Options{
		QuestionField: d.QuestionField, AnswerField: d.AnswerField, SolutionField: d.SolutionField, IDField: d.IDField,
	}, d.PromptSuffix, task.Train)
}

// sharedTrainTask loads the shared data set that d.Path names (math_train,
// gsm8k, ...) as the training split.
func sharedTrainTask(d *config.Dataset) (task.Task, error) {
	if d.QuestionField != "" || d.AnswerField != "" || d.SolutionField != "" || d.IDField != "" {
		return nil, fmt.Errorf("%s names a shared data set, whose fields are fixed; remove question_field, answer_field, solution_field and id_field", d.Path)
	}
	probs, _, err := dataset.LoadShared(d.Path)
	if err != nil {
		return nil, err
	}
	ds := dataset.New(d.Path, probs, nil)
	if d.PromptSuffix != "" {
		ds = ds.WithSuffix(d.PromptSuffix)
	}
	return ds, nil
}

// DatasetTask loads a JSONL or Parquet file as a task whose problems form the
// given split, with an optional suffix on every question.
func DatasetTask(path string, opts dataset.Options, suffix string, split task.Split) (task.Task, error) {
	probs, err := dataset.Load(path, opts)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var d *dataset.Dataset
	if split == task.Train {
		d = dataset.New(name, probs, nil)
	} else {
		d = dataset.New(name, nil, probs)
	}
	if suffix != "" {
		d = d.WithSuffix(suffix)
	}
	return d, nil
}
