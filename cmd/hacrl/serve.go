package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/gomlx/compute"

	"github.com/hacrl/hacrl/internal/checksum"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/serve"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func serveCmd() *cobra.Command {
	var (
		tf                                       templateFlags
		addr, apiKey, name, version, backendCfg  string
		maxBatch, maxContext, maxConc, maxN, def int
		maxBody                                  int64
		shutdown                                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve CHECKPOINT",
		Short: "Serve one saved agent over an OpenAI-compatible HTTP API",
		Long: `Serve one saved agent alone over the OpenAI-compatible HTTP API that vLLM,
SGLang and llama.cpp speak, so that OpenAI clients and RL frameworks can
sample it:

  POST /v1/completions       prompt as text, texts, token ids or lists of
                             them; max_tokens, temperature, top_p, top_k, n,
                             stop, stop_token_ids, seed, logprobs, echo
                             (with max_tokens 0: score the prompt), stream,
                             stream_options, ignore_eos, vLLM's
                             return_token_ids and return_tokens_as_token_ids
  POST /v1/chat/completions  messages through the checkpoint's template;
                             logprobs and top_logprobs, the same sampling
                             fields, chat_template_kwargs (hf templates)
  GET  /v1/models            the served model (--name)
  GET  /health
  POST /update_weights_from_disk {"model_path": DIR, "weight_version"?}
                             SGLang's: load DIR (a checkpoint of the same
                             architecture, or a LoRA adapter of the served
                             base) and swap it in between batches, no
                             request dropped
  GET  /get_weight_version

Requests that arrive together are decoded together (continuous batching,
at most --max-batch sequences at once), each with its own sampling and
seed: choice k of a request with seed s samples as hacrl generate's row
does with model.SeedStream(s, k). Responses stop at the template's stop
tokens (EOS, end of turn) unless ignore_eos, and carry the weight_version
they were sampled with.

It binds to 127.0.0.1:8000 (--addr); --api-key KEY (or $HACRL_API_KEY)
requires "Authorization: Bearer KEY" on every route. Requests over a bound
(--max-body-bytes, --max-n, the context --max-context, --max-concurrent in
flight) get a 4xx in OpenAI's error shape.

An interrupt (SIGINT, SIGTERM) stops it: no new connections, the requests
in flight (streams too) finish, and it exits with status 130 as soon as
none is left, at once when idle. Requests still running after
--shutdown-timeout are cut: a 503 in OpenAI's error shape, or for a stream
that has begun an error event and [DONE]. A second interrupt aborts.

It needs the native engine: a float32 model on the CPU (bfloat16 and
float16 checkpoints load as float32).

` + varsHelp + "\n\n" + adapterHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if shutdown <= 0 {
				return usage("--shutdown-timeout must be > 0, got %s", shutdown)
			}
			onInterrupt(fmt.Sprintf("stopping the server: no new requests; those in flight get up to %s (--shutdown-timeout) to finish", shutdown))
			if err := tf.check(); err != nil {
				return err
			}
			for _, b := range []struct {
				flag string
				v    int64
			}{{"max-batch", int64(maxBatch)}, {"max-context", int64(maxContext)}, {"max-concurrent", int64(maxConc)},
				{"max-n", int64(maxN)}, {"max-tokens", int64(def)}, {"max-body-bytes", maxBody}} {
				if b.v < 0 {
					return usage("--%s must be >= 0 (0: the default), got %d", b.flag, b.v)
				}
			}
			if apiKey == "" {
				apiKey = serve.APIKeyFromEnv()
			}
			s, a, b, err := tf.loadAgent(cmd, args[0], backendCfg)
			if err != nil {
				return err
			}
			if name == "" {
				name = a.Name
			}
			smp := a.Sampling
			if def > 0 {
				smp.MaxNewTokens = def
			}
			cfg := serve.Config{Model: a.Model, Tok: a.Tok, Template: a.Template, Sampling: smp, Name: name,
				APIKey: apiKey, WeightVersion: version, MaxBatch: maxBatch, MaxContext: maxContext,
				MaxConcurrent: maxConc, MaxN: maxN, MaxBodyBytes: maxBody, ShutdownTimeout: shutdown,
				Load: func(_ context.Context, dir string) (*model.Model, error) { return loadUpdate(b, s, dir) }}
			srv, err := serve.New(cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			c := srv.Config()
			fmt.Fprintf(cmd.ErrOrStderr(), "serving %s (weight version %s) on http://%s: %d sequences at once, context %d tokens, %d requests in flight\n",
				c.Name, c.WeightVersion, l.Addr(), c.MaxBatch, c.MaxContext, c.MaxConcurrent)
			if err := srv.Serve(cmd.Context(), l); err != nil {
				return err
			}
			msg := "stopped"
			switch n := srv.Cut(); n {
			case 0:
			case 1:
				msg += fmt.Sprintf(" (1 request still running after --shutdown-timeout %s was cut)", shutdown)
			default:
				msg += fmt.Sprintf(" (%d requests still running after --shutdown-timeout %s were cut)", n, shutdown)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), msg)
			return exitCode(130) // Serve returns only once ctx is done: an interrupt
		},
	}
	f := cmd.Flags()
	tf.register(f, true)
	tf.adapter.register(f)
	f.StringVar(&addr, "addr", serve.DefaultAddr, "address to listen on (host:port)")
	f.StringVar(&apiKey, "api-key", "", "require this bearer token on every route (default: $HACRL_API_KEY; none when empty)")
	f.StringVar(&name, "name", "", "model id clients name (default: the agent's name)")
	f.StringVar(&version, "weight-version", "0", "weight version of the served weights")
	f.IntVar(&maxBatch, "max-batch", 0, "most sequences decoded at once (0: as many as a 4 GiB key/value cache holds, at most 64)")
	f.IntVar(&maxContext, "max-context", 0, "most tokens of one sequence, prompt and response (0: the model's, at most 2048)")
	f.IntVar(&maxConc, "max-concurrent", 0, "most generation requests in flight; more get 429 (0: 4 × --max-batch)")
	f.IntVar(&maxN, "max-n", 0, "most choices per request, prompts × n (0: 16)")
	f.IntVar(&def, "max-tokens", 0, "max_tokens of a request that gives none (0: the agent's max_new_tokens)")
	f.Int64Var(&maxBody, "max-body-bytes", 0, "largest request body in bytes; larger get 413 (0: 4 MiB)")
	f.DurationVar(&shutdown, "shutdown-timeout", serve.DefaultShutdownTimeout, "on an interrupt, how long the requests in flight get to finish before they are cut")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	return cmd
}

// loadUpdate reads the weights of /update_weights_from_disk: a checkpoint
// directory, or a LoRA adapter directory loaded onto the served base.
func loadUpdate(b compute.Backend, s *train.Saved, dir string) (*model.Model, error) {
	base := dir
	if model.IsAdapterDir(dir) {
		base = s.Base
	}
	if _, err := checksum.Verify(dir); err != nil { // a directory a run wrote carries its checksums
		return nil, err
	}
	m, err := model.Load(b, base)
	if err != nil {
		return nil, err
	}
	if base != dir {
		if err := m.LoadAdapters(dir); err != nil {
			return nil, err
		}
	}
	if err := train.CheckVocab(s.Tok, s.TokPath, m); err != nil {
		return nil, err
	}
	return m, nil
}
