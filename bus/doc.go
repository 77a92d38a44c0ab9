// Package bus carries a run's step exchange between agents in separate
// processes or machines, over NATS JetStream.
//
// HACRL agents share only their verified rollouts, so each agent can live in
// its own process — its own weights, optimizer and engine — as long as every
// agent sees the same pool each step. This package is the wire for that: an
// agent Publishes its step's payload (opaque bytes; package train encodes the
// rollouts) and Collects everyone's payload of the step, waiting for the
// slowest agent with a bounded timeout. Weights and checkpoints never travel
// on the bus.
//
// What is NATS's, and what is written here. The server, its file-backed
// JetStream store, clustering with replicated streams, authentication (token,
// nkeys, creds files) and TLS are nats-server's own, embedded as a library
// (StartServer) or reached over the network (Connect). Nothing here
// re-implements a transport. What is written by hand is the thin layer NATS
// does not know about:
//
//   - The run's layout: one stream per run, HACRL_<run>, with a subject per
//     step and agent (hacrl.<run>.step.<s>.<agent>), and one key-value bucket,
//     hacrl_<run>, holding the run's identity and, per agent, its heartbeat,
//     the first step it still needs and the steps it finished with. Agent
//     names are escaped into subject tokens (bytes other than letters, digits,
//     '_' and '-' become =XX).
//   - Chunking. A step of a paper-sized run is tens of MB per agent, beyond
//     any server's max payload (1 MB by default, 8 MB at most recommended), so
//     Publish splits a payload into chunks under the connected server's limit.
//     Each chunk's headers are a small versioned envelope (Hacrl-Bus: 1): the
//     agent, the step, chunk i/n, its offset, the payload's size and SHA-256.
//     Collect puts the chunks back and checks size and checksum. The object
//     store would also chunk, but as a second structure (a bucket plus a
//     stream) to keep consistent with the step barrier; one stream with one
//     ordered consumer per Collect keeps the exchange a single log.
//   - Idempotency. Each chunk's message id is run/step/agent/chunk, so an agent
//     restarted after a crash publishes its step again and the server drops
//     what it already has (within the stream's duplicate window, 24 h by
//     default); Collect also keeps only the first copy of each chunk, so a
//     re-publish after the window changes nothing either.
//   - The barrier: Collect(ctx, step, agents, timeout) reads the step's subjects
//     of the named agents from the start of the stream and returns when every
//     agent's payload is complete, or a *MissingError naming the agents still
//     missing (and how many chunks of a half-published payload arrived) when
//     the timeout ends. State lives in JetStream, not in a process of ours:
//     any agent, restarted at any time, sees the same stream.
//   - Riding out a server restart. The client reconnects by itself, but a
//     request or acknowledgement in flight when the server went down is lost
//     and would wait as long as its context. So Collect reads in rounds: when
//     nothing arrives for 2 s it reads again through a new ordered consumer,
//     from the sequence after the last message it read; and Publish sends
//     again every chunk not acknowledged within 10 s (harmless: message ids).
//   - Bounded waits. Every call that waits for the server — connecting,
//     opening a run, publishing, heartbeats, the run's records — waits at
//     most the connection's ClientOptions.Wait, trying again what a
//     restart or a cut link lost, and then fails with a *WaitError saying
//     what it waited to do, on which server, for how long. Collect waits at
//     most its timeout, and CollectWatching tells the caller what it still
//     waits for (the agents missing, or the error reading met), for a
//     status line.
//   - Identity: the first process to open a run records its config hash and
//     code version (and RunSpec.Config, when given); a process that brings
//     other ones is refused with a *MismatchError saying what differs and
//     carrying the recorded config.
//   - Liveness: Heartbeat / KeepAlive put a key per agent; Agents lists them
//     with the server's time of the last beat.
//   - Retention and the end: Need records the first step an agent may still
//     collect (Needed: the earliest over agents, so the caller may DropStep
//     the rest); Finish / Finished record that an agent ended the run.
//
// Credentials apply to in-process connections too; refusals are tested on
// the listener, where they matter (in process, a refused client only sees its
// pipe closed).
//
// Safety defaults: an embedded server listens on 127.0.0.1 (a free port) or on
// nothing at all (InProcess); listening on another address requires
// credentials. JetStream stores to files in ServerOptions.Dir: a server
// started again on the same directory has every acknowledged message (the
// files are written before the acknowledgement; the server fsyncs them every
// two minutes, so a machine's power loss, not a process's crash, can lose the
// last ones — clusters replicate instead).
//
// On one machine:
//
//	srv, err := bus.StartServer(ctx, bus.ServerOptions{Dir: filepath.Join(runDir, "nats")})
//	conn, err := bus.Connect(ctx, srv.URL(), bus.ClientOptions{})   // in each agent process
//	run, err := conn.OpenRun(ctx, bus.RunSpec{ID: id, ConfigHash: h, CodeVersion: v})
//	err = run.Publish(ctx, step, "qwen", rollouts)
//	pool, err := run.Collect(ctx, step, []string{"qwen", "llama"}, 10*time.Minute)
//
// Across machines the agents Connect to a NATS cluster's URLs and open the run
// with Replicas: 3.
package bus
