package train

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/rollout"
)

// A run's agents can live in separate processes (hacrl agent, hacrl train
// --processes): each process trains one agent and learns from the pool every
// process sees. What a process needs of the others at a step is their
// rollouts, each with its reward and its source's old log-probs; everything
// else (the capability window, ω, advantages, the learner's view) every
// process derives from the pool itself. So a step in a member process is
// the single-process step with one exchange in the middle: sample, reward
// and score its own responses, Share them, and build the pool from
// everyone's, in the order one process would have built it. The pool is
// then identical, and so is everything computed from it.

// Member makes a run one agent's process of a run whose agents are separate
// processes.
type Member struct {
	// Agent names the config's agent this process trains.
	Agent string
	// Exchange carries each step's rollouts between the processes.
	Exchange Exchange
}

// Exchange carries a run's step exchange between its agents' processes
// (package bus over NATS JetStream, in hacrl agent). Steps count from 0; the
// setup exchange, before step 0, is step SetupStep.
//
// It also carries an interrupt: every agent of the run stops after the same
// step. An interrupted process asks for a stop with each step it shares
// until one is agreed; a request counts at the step it comes with only when
// this is the first time agent shares that step (else another agent may
// have read the step already), and every agent sees the same requests for a
// step. Requests of an earlier session of the run (before a --resume) do
// not count.
type Exchange interface {
	// Share stores payload as agent's part of step and returns every
	// agent's part of the step, by name, once all are there. Sharing the
	// same payload again (a restarted process) stores nothing new. With
	// stop set, agent asks every agent to stop after step; stoppedBy names
	// the agents whose requests count at step: when it is not empty, every
	// agent of the run gets the same names for the step, and stops after it.
	Share(ctx context.Context, step int, agent string, payload []byte, stop bool) (parts map[string][]byte, stoppedBy []string, err error)
	// Keep says that agent may resume from step `from` at the earliest (its
	// oldest checkpoint), so it needs no payload of an earlier step again.
	Keep(ctx context.Context, agent string, from int) error
}

// SetupStep is the step number of the exchange before the first step: the
// training problems each agent cannot fit, when a dataset drops them.
const SetupStep = -1

// payloadVersion is the encoding of a step payload; a process reading
// another version refuses it.
const payloadVersion = 1

// stepPayload is one agent's part of a step, as it travels between the
// processes (gob: compact and exact for token ids, float32 log-probs and
// float64 rewards).
type stepPayload struct {
	Version  int
	Step     int
	Agent    string
	Rollouts []rollout.Rollout
	// PromptTokens are the token counts of the agent's rendered prompts
	// (the original semantics balances by sequence length).
	PromptTokens []int
	// Prompts are the agent's rendered prompts of the step, as text, when
	// the step's rollouts are logged (the log shows each source's prompt).
	Prompts []string
}

// setupPayload is an agent's part of the setup exchange: the training
// problems (dataset indices) whose prompts leave it no room.
type setupPayload struct {
	Version int
	Agent   string
	TooLong []int
	Errors  string // the agent's fit error, for the message of a run that cannot start
}

func encodePayload(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, fmt.Errorf("encoding the exchange payload: %w", err)
	}
	return b.Bytes(), nil
}

// share publishes this process's rollouts of step (the pool holds only its
// own) with its prompts (src), asking the others to stop after the step if
// this process was interrupted, and returns the step's whole pool, every
// agent's rollouts in config order; it fills in src the other sources'
// prompts, and in r.stoppedBy the agents whose stop requests count at step.
func (r *Run) share(ctx context.Context, step int, pool *rollout.Pool, src *sources) (*rollout.Pool, error) {
	me := r.agents[0]
	logged := src.texts != nil
	mine := stepPayload{Version: payloadVersion, Step: step, Agent: me.Name, Rollouts: pool.Rollouts, PromptTokens: src.lens[me.Index]}
	if logged {
		mine.Prompts = src.texts[me.Index]
	}
	data, err := encodePayload(mine)
	if err != nil {
		return nil, err
	}
	got, stoppedBy, err := r.member.Exchange.Share(ctx, step, me.Name, data, r.interrupted())
	if err != nil {
		return nil, fmt.Errorf("step %d: exchanging rollouts: %w", step+1, err)
	}
	r.stoppedBy = stoppedBy
	G := r.cfg.Batch.ResponsesPerPrompt * r.algo.ResponsesMultiplier
	full := &rollout.Pool{Agents: pool.Agents, Prompts: pool.Prompts}
	for j, name := range r.names {
		if j == me.Index {
			full.Rollouts = append(full.Rollouts, pool.Rollouts...)
			continue
		}
		var p stepPayload
		if err := gob.NewDecoder(bytes.NewReader(got[name])).Decode(&p); err != nil {
			return nil, fmt.Errorf("step %d: the rollouts of agent %s do not decode: %w", step+1, name, err)
		}
		if err := checkPayload(&p, step, name, j, pool.Prompts, G, logged); err != nil {
			return nil, fmt.Errorf("step %d: the rollouts of agent %s: %w", step+1, name, err)
		}
		full.Rollouts = append(full.Rollouts, p.Rollouts...)
		src.lens[j] = p.PromptTokens
		if logged {
			src.texts[j] = p.Prompts
		}
	}
	return full, nil
}

// checkPayload checks another agent's part of a step against what this
// process expects of it: the step and agent, prompts × G rollouts of that
// source in prompt order, each with a finite log-prob ≤ 0 per token and a
// finite reward.
func checkPayload(p *stepPayload, step int, name string, source, prompts, G int, logged bool) error {
	switch {
	case p.Version != payloadVersion:
		return fmt.Errorf("payload version %d, this build reads %d", p.Version, payloadVersion)
	case p.Step != step || p.Agent != name:
		return fmt.Errorf("payload says step %d of agent %q", p.Step+1, p.Agent)
	case len(p.Rollouts) != prompts*G:
		return fmt.Errorf("%d rollouts, want %d prompts × %d responses", len(p.Rollouts), prompts, G)
	case len(p.PromptTokens) != prompts:
		return fmt.Errorf("%d prompt lengths, want %d", len(p.PromptTokens), prompts)
	case slices.Min(p.PromptTokens) < 1:
		return fmt.Errorf("a prompt of %d tokens, want at least 1", slices.Min(p.PromptTokens))
	case logged && len(p.Prompts) != prompts:
		return fmt.Errorf("%d prompt texts, want %d", len(p.Prompts), prompts)
	}
	for n := range p.Rollouts {
		ro := &p.Rollouts[n]
		switch {
		case ro.Source != source || ro.Prompt != n/G:
			return fmt.Errorf("rollout %d: source %d prompt %d, want source %d prompt %d", n, ro.Source, ro.Prompt, source, n/G)
		case len(ro.Tokens) == 0 || len(ro.OldLogProbs) != len(ro.Tokens):
			return fmt.Errorf("rollout %d: %d tokens with %d old log-probs", n, len(ro.Tokens), len(ro.OldLogProbs))
		case math.IsNaN(ro.Reward) || math.IsInf(ro.Reward, 0):
			return fmt.Errorf("rollout %d: reward %v", n, ro.Reward)
		case len(ro.ISWeights) > 1 && len(ro.ISWeights) != len(ro.Tokens):
			return fmt.Errorf("rollout %d: %d rollout-correction weights for %d tokens, want 1 or one per token", n, len(ro.ISWeights), len(ro.Tokens))
		}
		for i, w := range ro.ISWeights {
			if !(w >= 0) || math.IsInf(w, 0) {
				return fmt.Errorf("rollout %d: rollout-correction weight %v at %d, want finite and >= 0", n, w, i)
			}
		}
		// A log-prob enters every learner's ratios with this source: a NaN,
		// an infinity or a positive value would poison them unnoticed.
		for i, lp := range ro.OldLogProbs {
			if !(lp <= 0) || math.IsInf(float64(lp), -1) {
				return fmt.Errorf("rollout %d: old log-prob %v at token %d, want a finite value ≤ 0", n, lp, i)
			}
		}
	}
	return nil
}

// shareTooLong exchanges, before the first step, the dataset problems each
// agent's prompt does not fit, and returns the union of all agents' (sorted)
// with every agent's fit errors: too_long: drop must leave the same problems
// out in every process.
func (r *Run) shareTooLong(ctx context.Context, mine []int, errs []string) ([]int, []string, error) {
	me := r.agents[0]
	msg := ""
	if len(errs) > 0 {
		msg = errs[0]
	}
	data, err := encodePayload(setupPayload{Version: payloadVersion, Agent: me.Name, TooLong: mine, Errors: msg})
	if err != nil {
		return nil, nil, err
	}
	// An interrupt during setup asks for the stop with the first step.
	got, _, err := r.member.Exchange.Share(ctx, SetupStep, me.Name, data, false)
	if err != nil {
		return nil, nil, fmt.Errorf("setup: exchanging the problems too long for each agent: %w", err)
	}
	union := slices.Clone(mine)
	all := slices.Clone(errs)
	for _, name := range r.names {
		if name == me.Name {
			continue
		}
		var p setupPayload
		if err := gob.NewDecoder(bytes.NewReader(got[name])).Decode(&p); err != nil {
			return nil, nil, fmt.Errorf("setup: the payload of agent %s does not decode: %w", name, err)
		}
		if p.Version != payloadVersion || p.Agent != name {
			return nil, nil, fmt.Errorf("setup: the payload of agent %s says version %d, agent %q", name, p.Version, p.Agent)
		}
		union = append(union, p.TooLong...)
		if p.Errors != "" {
			all = append(all, p.Errors)
		}
	}
	slices.Sort(union)
	return slices.Compact(union), all, nil
}

// keepFrom tells the exchange, after a member's checkpoint, the earliest
// step the member may resume from (its oldest checkpoint kept), so that the
// payloads no process can need again are dropped. It is housekeeping: a
// failure is logged, and the payloads stay.
func (r *Run) keepFrom(ctx context.Context) error {
	if r.member == nil {
		return nil
	}
	all, err := listCheckpoints(r.cfg.Out)
	if err != nil || len(all) == 0 {
		return err
	}
	from, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(all[0]), checkpointPrefix))
	if err != nil {
		return nil
	}
	if err := r.member.Exchange.Keep(context.WithoutCancel(ctx), r.agents[0].Name, from); err != nil {
		r.obs.Log(fmt.Sprintf("warning: %v (the exchange keeps earlier steps)", err))
	}
	return nil
}

// ConfigHash is the hash of cfg's training-relevant part, as checkpoints
// record it: what every process of one run must agree on.
func ConfigHash(cfg *config.Config) (string, error) {
	training, err := trainingConfig(cfg)
	if err != nil {
		return "", err
	}
	return configHash(training), nil
}
