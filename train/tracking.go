package train

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/tracking/mlflow"
)

// startTracking starts the experiment trackers of the config's tracking
// section and returns the metrics option that feeds them every record the
// run writes (none without a tracking section). A resumed run continues the
// MLflow run it logged to before.
func (r *Run) startTracking(resumed bool) ([]metrics.Option, error) {
	cfg := r.cfg
	if cfg.Tracking == nil || cfg.Tracking.MLflow == nil {
		return nil, nil
	}
	m := cfg.Tracking.MLflow
	token, err := trackingToken(cfg)
	if err != nil {
		return nil, err
	}
	experiment := m.Experiment
	if experiment == "" {
		experiment = cmp.Or(cfg.Name, "hacrl")
	}
	name := m.RunName
	if name == "" {
		abs, err := filepath.Abs(cfg.Out)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		name = filepath.Base(abs)
	} else if r.member != nil {
		name += "/" + r.member.Agent // each agent process logs its own run
	}
	tags := []mlflow.Tag{
		{Key: "hacrl.version", Value: buildVersion()},
		{Key: "hacrl.config_hash", Value: configHash(r.trainCfg)},
		{Key: "hacrl.method", Value: string(r.algo.Method)},
		{Key: "hacrl.agents", Value: strings.Join(r.names, ",")},
		{Key: "mlflow.source.name", Value: "hacrl train"},
	}
	if r.member != nil {
		tags = append(tags, mlflow.Tag{Key: "hacrl.agent", Value: r.member.Agent})
	}
	t, err := mlflow.Start(mlflow.Options{
		URI: m.URI, Experiment: experiment, RunName: name, Token: token,
		Dir: cfg.Out, Resume: resumed, Tags: tags,
		Params: []mlflow.Param{{Key: "method", Value: string(r.algo.Method)}, {Key: "seed", Value: strconv.FormatInt(cfg.Seed, 10)}},
		Log:    r.obs.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Where("tracking.mlflow"), err)
	}
	r.mlflow = t
	return []metrics.Option{metrics.WithSink(t)}, nil
}

// trackingToken is the MLflow bearer token of the environment variable that
// tracking.mlflow.token_env names ("" when it names none); New checks it
// before it writes anything.
func trackingToken(cfg *config.Config) (string, error) {
	if cfg.Tracking == nil || cfg.Tracking.MLflow == nil || cfg.Tracking.MLflow.TokenEnv == "" {
		return "", nil
	}
	name := cfg.Tracking.MLflow.TokenEnv
	token := os.Getenv(name)
	if token == "" {
		return "", fmt.Errorf("%s: environment variable %s is not set (or empty): it holds the MLflow server's bearer token", cfg.Where("tracking.mlflow.token_env"), name)
	}
	return token, nil
}

// endTracking flushes the trackers and sets the MLflow run's status from
// how Train ended: FINISHED, KILLED when interrupted, FAILED on an error
// (KILLED too for a run closed without training).
func (r *Run) endTracking(trained bool, err error) {
	if r.mlflow == nil {
		return
	}
	status := mlflow.Finished
	switch {
	case !trained || errors.Is(err, ErrInterrupted):
		status = mlflow.Killed
	case err != nil:
		status = mlflow.Failed
	}
	r.mlflow.Close(status)
	r.mlflow = nil
}

// buildVersion is the module version and VCS revision stamped into this
// executable, as hacrl --version names them.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v, rev := bi.Main.Version, ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				rev += "+dirty"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if rev != "" {
		v += " " + rev
	}
	return v
}
