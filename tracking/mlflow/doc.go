// Package mlflow logs a training run to an MLflow tracking server, over
// MLflow's REST API 2.0 (/api/2.0/mlflow/…). MLflow publishes no Go client,
// so this package is its own: the few calls a training run needs.
//
// A Tracker is the metrics.Sink a run's metrics.Writer passes every record
// to (config tracking.mlflow; package train starts it). In the background it
//
//   - finds the experiment by name (experiments/get-by-name), creating it
//     when missing (experiments/create);
//   - creates the run (runs/create) with its name and tags — hacrl.version,
//     hacrl.config_hash, hacrl.method, hacrl.agents — and logs the params
//     method and seed; the run's id goes to OUT/mlflow.json (StateFile),
//     written atomically;
//   - logs each step's metrics as one runs/log-batch request (split at
//     MLflow's limit of 1000 metrics a request): an agent's metric as
//     "<agent>/<key>", a run-wide one as "<key>", with the record's step and
//     time; a character MLflow refuses in a name becomes '_' (Key);
//   - at the end (Close) sets the run's status: FINISHED, FAILED, or KILLED
//     for an interrupted run (runs/update).
//
// A server that is down, slow or overloaded never stops or slows training:
// Record only queues, the queue is bounded (Options.MaxPending steps; the
// oldest step is dropped beyond it), requests are retried with exponential
// backoff (and jitter) up to Options.MaxBackoff, the first failure is logged
// once, and Close waits at most Options.FlushTimeout before reporting in the
// run's log how many steps' metrics were not logged. A request the server
// refuses (4xx) is not retried: its step is dropped and said so.
//
// A resumed run (Options.Resume) continues the MLflow run OUT/mlflow.json
// names. MLflow keeps every value logged, duplicates too, so before logging
// the tracker reads each metric's latest logged step (runs/get) and leaves
// out what it would log again: the steps between the checkpoint and the
// crash, which the resumed run computes again. (A batch whose request
// reached the server but whose answer did not — a timeout — is sent again
// and kept twice: the REST API has no idempotent logging.)
package mlflow
