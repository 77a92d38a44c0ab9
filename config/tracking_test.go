package config

import (
	"testing"
)

func TestTrackingSection(t *testing.T) {
	tests := []struct {
		name, section, want string
	}{
		{"mlflow", "tracking: {mlflow: {uri: 'http://127.0.0.1:5000', experiment: arith, run_name: r1, token_env: MLFLOW_TRACKING_TOKEN}}", ""},
		{"uri only", "tracking: {mlflow: {uri: 'https://mlflow.example/base'}}", ""},
		{"empty", "tracking: {}", ""},
		{"no uri", "tracking: {mlflow: {experiment: arith}}", "tracking.mlflow.uri (line 23): required"},
		{"bad scheme", "tracking: {mlflow: {uri: 'file:///tmp/mlruns'}}", `tracking.mlflow.uri (line 23): must be http://HOST[:PORT] or https://…, got "file:///tmp/mlruns"`},
		{"no host", "tracking: {mlflow: {uri: 'http://'}}", "tracking.mlflow.uri (line 23): must be http://"},
		{"token not a name", "tracking: {mlflow: {uri: 'http://127.0.0.1:5000', token_env: 'Bearer abc'}}", "tracking.mlflow.token_env (line 23): must be the name of an environment variable"},
		{"unknown tracker", "tracking: {wandb: {project: p}}", "tracking.wandb (line"},
		{"unknown key", "tracking: {mlflow: {uri: 'http://127.0.0.1:5000', experiment_name: x}}", "tracking.mlflow.experiment_name (line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := parseSection(t, tc.section, tc.want)
			if c == nil {
				return
			}
			if c.Tracking == nil {
				t.Fatal("no tracking section")
			}
			if m := c.Tracking.MLflow; tc.name == "mlflow" && (m.URI != "http://127.0.0.1:5000" || m.Experiment != "arith" || m.RunName != "r1" || m.TokenEnv != "MLFLOW_TRACKING_TOKEN") {
				t.Errorf("values: %+v", m)
			}
		})
	}
}
