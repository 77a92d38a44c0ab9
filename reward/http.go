package reward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxBody bounds an HTTP answer.
const maxBody = 256 << 20

// endpoint is the HTTP transport: each request POSTed as a JSON body.
type endpoint struct {
	url    string
	token  string
	client *http.Client
	broken error
}

func newHTTP(opts Options, token string) *endpoint {
	return &endpoint{url: opts.URL, token: token, client: &http.Client{}}
}

func (e *endpoint) start(context.Context) error { return nil }

func (e *endpoint) close() error {
	e.client.CloseIdleConnections()
	return nil
}

func (e *endpoint) fail(err error) error {
	if e.broken == nil {
		e.broken = err
	}
	return err
}

func (e *endpoint) roundTrip(ctx context.Context, body []byte, timeout limit) ([]byte, error) {
	if e.broken != nil {
		return nil, e.broken
	}
	ctx, cancel := context.WithTimeout(ctx, timeout.d)
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
		return nil, e.fail(transportError(ctx, err, timeout))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, e.fail(transportError(ctx, err, timeout))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, e.fail(fmt.Errorf("HTTP %s; the body began: %s", resp.Status, snippet(data)))
	}
	if len(data) > maxBody {
		return nil, e.fail(fmt.Errorf("the answer is longer than %d bytes", maxBody))
	}
	return data, nil
}

// transportError says why no answer came: the timeout or the connection.
func transportError(ctx context.Context, err error, timeout limit) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("no answer: %w", err)
}
