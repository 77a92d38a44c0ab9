package reward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// maxBody bounds an HTTP answer.
const maxBody = 256 << 20

// endpoint is the HTTP transport: each request POSTed as a JSON body.
type endpoint struct {
	url     string
	token   string
	timeout time.Duration
	client  *http.Client
}

func newHTTP(opts Options, token string) *endpoint {
	return &endpoint{url: opts.URL, token: token, timeout: opts.Timeout, client: &http.Client{}}
}

func (e *endpoint) start(context.Context) error { return nil }

func (e *endpoint) close() error {
	e.client.CloseIdleConnections()
	return nil
}

func (e *endpoint) roundTrip(ctx context.Context, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, e.transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("HTTP %s; the body began: %s", resp.Status, snippet(data))
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("the answer is longer than %d bytes", maxBody)
	}
	return data, nil
}

// transportError says why no answer came: the timeout or the connection.
func (e *endpoint) transportError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v (reward.timeout)", e.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("no answer: %w", err)
}
