package mlflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The limits of one runs/log-batch request (MLflow's REST API reference).
const (
	MaxBatchMetrics  = 1000
	MaxBatchParams   = 100
	MaxBatchTags     = 100
	MaxBatchEntities = 1000 // metrics, params and tags together
)

// Run statuses (runs/update).
const (
	Running  = "RUNNING"
	Finished = "FINISHED"
	Failed   = "FAILED"
	Killed   = "KILLED"
)

// Client calls an MLflow tracking server's REST API 2.0.
type Client struct {
	base  string // the tracking URI without its trailing slash
	token string // bearer token; "" sends none
	http  *http.Client
}

// NewClient returns a client of the tracking server at uri (http or https),
// each request bounded by timeout; token, when not empty, goes with every
// request as "Authorization: Bearer TOKEN".
func NewClient(uri, token string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mlflow: tracking URI %q: want http://HOST[:PORT][/PATH] or https://…", uri)
	}
	return &Client{base: strings.TrimRight(uri, "/"), token: token, http: &http.Client{Timeout: timeout}}, nil
}

// Metric is one value of a metric at a step; Timestamp is in milliseconds
// since the Unix epoch. Value may be NaN or ±Inf.
type Metric struct {
	Key       string `json:"key"`
	Value     Float  `json:"value"`
	Timestamp int64  `json:"timestamp"`
	Step      int64  `json:"step"`
}

// Float is a float64 in MLflow's JSON: a number, or the strings "NaN",
// "Infinity" and "-Infinity" (protobuf's JSON mapping) for the values JSON
// numbers cannot hold.
type Float float64

// MarshalJSON writes f as a number, or as protobuf's string for NaN and ±Inf.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or one of protobuf's strings.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN":
			*f = Float(math.NaN())
		case "Infinity":
			*f = Float(math.Inf(1))
		case "-Infinity":
			*f = Float(math.Inf(-1))
		default:
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("mlflow: metric value %q is not a number", s)
			}
			*f = Float(v)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// Param is a run parameter; Tag a run tag.
type (
	Param struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	Tag = Param
)

// RunInfo is a run's metadata; RunData what was logged to it (the latest
// value of each metric).
type (
	RunInfo struct {
		RunID        string `json:"run_id"`
		RunName      string `json:"run_name"`
		ExperimentID string `json:"experiment_id"`
		Status       string `json:"status"`
	}
	RunData struct {
		Metrics []Metric `json:"metrics"`
		Params  []Param  `json:"params"`
		Tags    []Tag    `json:"tags"`
	}
	Run struct {
		Info RunInfo `json:"info"`
		Data RunData `json:"data"`
	}
)

// APIError is an error answer of the server: its HTTP status and MLflow's
// error code (RESOURCE_DOES_NOT_EXIST, INVALID_PARAMETER_VALUE, …).
type APIError struct {
	Endpoint string
	Status   int
	Code     string
	Message  string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("mlflow: %s: HTTP %d: %s", e.Endpoint, e.Status, e.Message)
	}
	return fmt.Sprintf("mlflow: %s: HTTP %d %s: %s", e.Endpoint, e.Status, e.Code, e.Message)
}

// Retryable reports whether err may pass by itself: the server unreachable
// or slow, or an answer of 429 or 5xx. An error answer of 4xx (a bad
// request, a refused token, a deleted run) will not.
func Retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// call sends a request to endpoint (the path after /api/2.0/mlflow/): a GET
// with query when body is nil, else a POST of body as JSON; it decodes the
// answer into out (when not nil).
func (c *Client) call(ctx context.Context, endpoint string, query url.Values, body, out any) error {
	u := c.base + "/api/2.0/mlflow/" + endpoint
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("mlflow: %s: %w", endpoint, err)
		}
		method, rd = http.MethodPost, bytes.NewReader(data)
	} else if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("mlflow: %s: %w", endpoint, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("mlflow: %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("mlflow: %s: reading the answer: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		ae := &APIError{Endpoint: endpoint, Status: resp.StatusCode}
		var e struct {
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && (e.Code != "" || e.Message != "") {
			ae.Code, ae.Message = e.Code, e.Message
		} else {
			ae.Message = strings.TrimSpace(string(data[:min(len(data), 300)]))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mlflow: %s: the answer is not the JSON expected: %w", endpoint, err)
	}
	return nil
}

// ExperimentID returns the id of the experiment named name, creating it when
// there is none.
func (c *Client) ExperimentID(ctx context.Context, name string) (string, error) {
	var got struct {
		Experiment struct {
			ID             string `json:"experiment_id"`
			LifecycleStage string `json:"lifecycle_stage"`
		} `json:"experiment"`
	}
	err := c.call(ctx, "experiments/get-by-name", url.Values{"experiment_name": {name}}, nil, &got)
	if err == nil {
		if got.Experiment.LifecycleStage == "deleted" {
			return "", fmt.Errorf("mlflow: experiment %q is deleted (restore it, or name another)", name)
		}
		return got.Experiment.ID, nil
	}
	if ae := (*APIError)(nil); !errors.As(err, &ae) || ae.Code != "RESOURCE_DOES_NOT_EXIST" {
		return "", err
	}
	var created struct {
		ID string `json:"experiment_id"`
	}
	err = c.call(ctx, "experiments/create", nil, map[string]string{"name": name}, &created)
	if ae := (*APIError)(nil); errors.As(err, &ae) && ae.Code == "RESOURCE_ALREADY_EXISTS" {
		return c.ExperimentID(ctx, name) // created meanwhile by another run
	}
	return created.ID, err
}

// CreateRun starts a run in an experiment and returns its id.
func (c *Client) CreateRun(ctx context.Context, experimentID, name string, start time.Time, tags []Tag) (string, error) {
	var got struct {
		Run Run `json:"run"`
	}
	req := map[string]any{"experiment_id": experimentID, "run_name": name, "start_time": start.UnixMilli(), "tags": tags}
	if err := c.call(ctx, "runs/create", nil, req, &got); err != nil {
		return "", err
	}
	if got.Run.Info.RunID == "" {
		return "", errors.New("mlflow: runs/create answered no run id")
	}
	return got.Run.Info.RunID, nil
}

// GetRun returns a run's metadata and the latest value of each of its
// metrics (the value at its highest step).
func (c *Client) GetRun(ctx context.Context, runID string) (*Run, error) {
	var got struct {
		Run Run `json:"run"`
	}
	if err := c.call(ctx, "runs/get", url.Values{"run_id": {runID}}, nil, &got); err != nil {
		return nil, err
	}
	return &got.Run, nil
}

// MetricHistory returns every value logged of one metric of a run.
func (c *Client) MetricHistory(ctx context.Context, runID, key string) ([]Metric, error) {
	var all []Metric
	token := ""
	for {
		q := url.Values{"run_id": {runID}, "metric_key": {key}, "max_results": {"25000"}}
		if token != "" {
			q.Set("page_token", token)
		}
		var got struct {
			Metrics []Metric `json:"metrics"`
			Next    string   `json:"next_page_token"`
		}
		if err := c.call(ctx, "metrics/get-history", q, nil, &got); err != nil {
			return nil, err
		}
		all = append(all, got.Metrics...)
		if got.Next == "" {
			return all, nil
		}
		token = got.Next
	}
}

// LogBatch logs metrics, params and tags to a run, in as many runs/log-batch
// requests as MLflow's limits need (MaxBatchMetrics, …), in order.
func (c *Client) LogBatch(ctx context.Context, runID string, metrics []Metric, params []Param, tags []Tag) error {
	// The server wants every list, empty ones too: JSON null is an error.
	metrics, params, tags = append([]Metric{}, metrics...), append([]Param{}, params...), append([]Tag{}, tags...)
	for len(metrics)+len(params)+len(tags) > 0 {
		np := min(len(params), MaxBatchParams)
		nt := min(len(tags), MaxBatchTags, MaxBatchEntities-np)
		nm := min(len(metrics), MaxBatchMetrics, MaxBatchEntities-np-nt)
		req := map[string]any{"run_id": runID, "metrics": metrics[:nm], "params": params[:np], "tags": tags[:nt]}
		if err := c.call(ctx, "runs/log-batch", nil, req, nil); err != nil {
			return err
		}
		metrics, params, tags = metrics[nm:], params[np:], tags[nt:]
	}
	return nil
}

// UpdateRun sets a run's status (Running, Finished, Failed, Killed) and,
// for an ended one, its end time.
func (c *Client) UpdateRun(ctx context.Context, runID, status string, end time.Time) error {
	req := map[string]any{"run_id": runID, "status": status}
	if status != Running {
		req["end_time"] = end.UnixMilli()
	}
	return c.call(ctx, "runs/update", nil, req, nil)
}
