package train

import (
	"context"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/reward"
	"github.com/hacrl/hacrl/task"
)

// response is one response to judge.
type response struct {
	problem task.Problem
	agent   *Agent
	text    string
	tokens  int
	stopped bool
}

// judge scores a batch of responses: the task's own checker, or the run's
// external reward (config reward:), which takes the whole batch in one or a
// few requests.
type judge func(ctx context.Context, rs []response) ([]reward.Result, error)

// taskJudge is the task's own checker: correct means a reward of 1.
func taskJudge(t task.Task) judge {
	return func(_ context.Context, rs []response) ([]reward.Result, error) {
		out := make([]reward.Result, len(rs))
		for i, r := range rs {
			v := t.Reward(r.problem, r.text)
			out[i] = reward.Result{Reward: v, Correct: v >= 1}
		}
		return out, nil
	}
}

// externalJudge sends the batch to c as one purpose request (or batches).
func externalJudge(c *reward.Client, purpose string, step int) judge {
	return func(ctx context.Context, rs []response) ([]reward.Result, error) {
		items := make([]reward.Item, len(rs))
		for i, r := range rs {
			items[i] = reward.Item{
				ProblemID: r.problem.ID, Agent: r.agent.Name, Prompt: r.problem.Question,
				Response: r.text, Tokens: r.tokens, Truncated: !r.stopped,
			}
			if r.problem.Answer != "" {
				ref := r.problem.Answer
				items[i].Reference = &ref
			}
		}
		return c.Score(ctx, purpose, step, items)
	}
}

// newRewardClient prepares the config's external reward (nil without one);
// its stderr lines go to the observer.
func newRewardClient(cfg *config.Config, obs Observer) (*reward.Client, error) {
	rc := cfg.Reward
	if rc == nil {
		return nil, nil
	}
	timeout, start := rc.Timeouts()
	c, err := reward.New(reward.Options{
		Command: rc.Command, URL: rc.URL, TokenEnv: rc.TokenEnv,
		Timeout: timeout, StartTimeout: start, BatchSize: rc.BatchSize, Range: rewardRange(rc),
		Log: func(line string) { obs.Log("reward: " + line) },
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// trainJudge is how step's training responses are scored.
func (r *Run) trainJudge(step int) judge {
	if r.reward != nil {
		return externalJudge(r.reward, reward.PurposeTrain, step)
	}
	return taskJudge(r.data.task)
}

// evalJudge is how set s is scored in the evaluation after step steps: the
// external reward with reward.eval, except for benchmarks; else its task.
func (r *Run) evalJudge(s *evalSet, step int) judge {
	if r.reward != nil && r.cfg.Reward.Eval && s.cfg.Benchmark == "" {
		return externalJudge(r.reward, reward.PurposeEval, step)
	}
	return taskJudge(s.task)
}

// startReward starts the external reward, if any, for the run's life.
func (r *Run) startReward(ctx context.Context) error {
	if r.reward == nil {
		return nil
	}
	return r.reward.Start(ctx)
}

// stopReward stops the external reward, reporting a failure to stop as a
// message (the run's own result stands).
func (r *Run) stopReward() {
	if r.reward == nil {
		return
	}
	if err := r.reward.Close(); err != nil {
		r.obs.Log(err.Error())
	}
}

// rewardRange is the range an external reward's answers must lie in.
func rewardRange(rc *config.Reward) [2]float64 {
	if len(rc.Range) == 2 {
		return [2]float64{rc.Range[0], rc.Range[1]}
	}
	return [2]float64{0, 1}
}
