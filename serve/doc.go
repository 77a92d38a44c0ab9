// Package serve is hacrl's OpenAI-compatible HTTP server of one model
// (hacrl serve): POST /v1/completions and /v1/chat/completions (with
// server-sent-event streaming), GET /v1/models and /health, and SGLang's
// POST /update_weights_from_disk and GET /get_weight_version, so that
// OpenAI clients and the RL frameworks that sample through such servers can
// use an agent trained by hacrl.
//
// The HTTP layer (handlers.go, api.go) validates each request into
// generation parameters and hands its sequences (one per choice) to the
// scheduler (scheduler.go): one goroutine that owns a model.Batch, admits
// new sequences between decoding steps, delivers every new token to its
// request and drops the sequences whose client disconnected, so requests
// that arrive together are decoded together, each with its own sampling
// settings and seed. Choice k of a request with seed s samples from
// model.SeedStream(s, k): a request for one prompt with seed
// model.RowSeeds(rng, n)[i] gets the tokens model.Generate gives row i of
// n with rng, bit for bit. A request without a seed draws one.
//
// A weight update (Server.UpdateWeights) pauses admission, lets the
// sequences in the batch finish on the old weights, rebuilds the batch on
// the new model and resumes; each response names the weight_version it was
// sampled with.
//
// Every bound (body bytes, n, max_tokens within the context, concurrent
// requests, the time a body may take to arrive) answers a request over it
// with a 4xx in OpenAI's error shape; a response write that blocks for
// 30 s (a client that stopped reading) ends its request and frees its slot;
// a panic in a handler or a decoding step fails that request, not the
// server. Serve stops when its context ends: at once when idle, else once
// the requests in flight have finished, cutting those still running after
// Config.ShutdownTimeout (a 503, or an error event and [DONE] for a stream). The server needs the native engine (a float32 model on the CPU):
// the graph engine has no continuous batching.
package serve
