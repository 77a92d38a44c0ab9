"""Reads an MLflow run back with MLflow's own Python client, the oracle of
what hacrl logged: reads {"uri", "run_id"} as JSON on stdin and prints
{"status", "run_name", "experiment", "experiment_id", "params", "tags",
"metrics"}, where
metrics maps each key to its whole history as [step, value, timestamp_ms]
in the order MLflow returns it (non-finite values as the strings "NaN",
"Infinity", "-Infinity", which JSON cannot hold as numbers). Only the
loopback server the test started is contacted."""
import json
import math
import sys

from mlflow.tracking import MlflowClient


def value(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def main():
    req = json.load(sys.stdin)
    client = MlflowClient(tracking_uri=req["uri"])
    run = client.get_run(req["run_id"])
    exp = client.get_experiment(run.info.experiment_id)
    metrics = {}
    for key in sorted(run.data.metrics):
        hist = client.get_metric_history(run.info.run_id, key)
        metrics[key] = [[m.step, value(m.value), m.timestamp] for m in hist]
    json.dump({
        "status": run.info.status,
        "run_name": run.info.run_name,
        "experiment": exp.name,
        "experiment_id": exp.experiment_id,
        "params": run.data.params,
        "tags": run.data.tags,
        "metrics": metrics,
    }, sys.stdout)


if __name__ == "__main__":
    main()
