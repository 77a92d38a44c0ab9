// Package rolloutengine samples an agent's rollouts: in-process with the
// agent's own model (Local), or through an OpenAI-compatible inference
// server (Client) — vLLM, SGLang or hacrl serve — to which the trainer
// pushes the agent's weights after every update.
//
// The training loop calls one thing whatever the engine, Engine.Sample:
// prompts as token ids, the agent's sampling options and the step's random
// source, giving one response per prompt with its token ids, per-token
// log-probs, whether it stopped, and the weight version it was sampled
// with. Row i samples from model.SeedStream(model.RowSeeds(rng, n)[i], 0)
// in-process; a Client sends that seed with the row's request (n = 1), so
// a server that samples a request with seed s from model.SeedStream(s, 0),
// as hacrl serve does, draws exactly what the in-process engine draws.
//
// A Client is a Syncer: Push writes the agent's weights as a Hugging Face
// checkpoint (the caller's save function fills a directory) and has the
// server load them, labelled with a version (the number of steps done).
// Every response the server reports as sampled with another version is
// sampled again (bounded), and never returned as on-policy. The server's
// log-probs come back with each response; the trainer still computes the
// old log-probs of the method with its own model.
//
// Dialects (the request shapes are in the tests' testdata, with where
// each is documented):
//
//   - vllm: POST /v1/completions with prompt token ids, return_token_ids
//     and logprobs 0; weights reload through vLLM's dev-mode
//     /collective_rpc {"method": "reload_weights"} from the path the server
//     was started with (a symbolic link Push swaps), then
//     /reset_prefix_cache. vLLM reports no weight version: a response is
//     attributed the version pushed last.
//   - sglang: native POST /generate with input_ids and return_logprob;
//     weights reload with /update_weights_from_disk {model_path,
//     weight_version}, and responses carry meta_info.weight_version.
//   - hacrl: hacrl serve, as vllm for sampling (plus a top-level
//     weight_version in each response) and as sglang for the reload.
package rolloutengine

import (
	"context"
	"math/rand/v2"

	"github.com/hacrl/hacrl/model"
)

// Sample is one response and the weights it was sampled with.
type Sample struct {
	model.Sample
	// WeightVersion is the version of the weights that sampled it: "" in
	// process (always the trainer's current weights); from a server, the
	// version it reported, or the version pushed last when it reports none.
	WeightVersion string
	// Resampled is how many times the response was sampled again because
	// the server reported stale weights.
	Resampled int
}

// Engine samples one response per prompt.
type Engine interface {
	// Sample continues each prompt once. Row i samples from the stream
	// model.SeedStream(model.RowSeeds(rng, len(prompts))[i], 0); rng may be
	// nil for greedy options.
	Sample(ctx context.Context, prompts [][]int, opt model.SampleOptions, rng *rand.Rand) ([]Sample, error)
}

// Syncer is an Engine whose weights live elsewhere: after each update the
// trainer pushes its weights with Push.
type Syncer interface {
	Engine
	// Push has the engine sample with new weights from now on: save writes
	// them as a Hugging Face checkpoint into the directory it is given,
	// and version labels them.
	Push(ctx context.Context, version string, save func(dir string) error) error
}

// Local samples in-process with a model (model.Model.Generate).
type Local struct{ Model *model.Model }

// Sample implements Engine.
func (l Local) Sample(ctx context.Context, prompts [][]int, opt model.SampleOptions, rng *rand.Rand) ([]Sample, error) {
	samples, err := l.Model.Generate(ctx, prompts, opt, rng)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, len(samples))
	for i, s := range samples {
		out[i] = Sample{Sample: s}
	}
	return out, nil
}
