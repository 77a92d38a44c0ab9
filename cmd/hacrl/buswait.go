package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/progress"
)

// busStatus shows on an agent's status line what it waits for on the bus —
// the other agents' rollouts, or the bus itself when it does not answer —
// and says what to do when a wait runs out (--wait).
type busStatus struct {
	disp  *progress.Display
	agent string
	url   string
	wait  time.Duration
}

// showWaitAfter is how long a wait goes unsaid: a step's exchange usually
// takes less.
const showWaitAfter = time.Second

// during runs fn; while it lasts longer than showWaitAfter, the status says
// what it waits for (what is asked again every second), until fn returns.
func (s *busStatus) during(what func() (forWhat, detail string), fn func() error) error {
	done := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(showWaitAfter)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown {
					s.disp.Waited(s.agent)
				}
				return
			case <-t.C:
				forWhat, detail := what()
				s.disp.Wait(s.agent, forWhat, detail, start)
				shown = true
				t.Reset(time.Second)
			}
		}
	})
	err := fn()
	close(done)
	wg.Wait()
	return err
}

// onBus is a wait for the bus itself, doing detail.
func (s *busStatus) onBus(detail string) func() (string, string) {
	return func() (string, string) { return s.busName(), detail }
}

func (s *busStatus) busName() string { return "the bus (" + s.url + ")" }

// advise adds to a wait on the bus that ran out what to do about it.
func (s *busStatus) advise(err error) error {
	var we *bus.WaitError
	if !errors.As(err, &we) {
		return err
	}
	return fmt.Errorf("%w\nthe bus did not answer within --wait %v: check that %s is up and reachable from this machine, then start this agent again with --resume (it goes on from its latest checkpoint; a longer --wait rides out longer outages)",
		err, s.wait, s.url)
}

// keepAlive beats for agent until ctx ends. Heartbeats that fail for
// --wait (the bus cut off) are said on the status, and beating goes on:
// the agent's own waits on the bus decide whether it stops.
func keepAlive(ctx context.Context, run *bus.Run, agent string, disp *progress.Display) {
	for {
		err := run.KeepAlive(ctx, agent, heartbeatEvery)
		if err == nil || ctx.Err() != nil {
			return
		}
		disp.Log(fmt.Sprintf("warning: %v; heartbeats go on", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(heartbeatEvery):
		}
	}
}

// collectWait is what a step's Collect waits for, as the status says it.
type collectWait struct {
	mu sync.Mutex
	w  bus.Waiting
}

func (c *collectWait) set(w bus.Waiting) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w = w
}

// what: the agents still missing at step ("step 3", "the setup exchange"),
// or the bus when reading from it fails.
func (c *collectWait) what(s *busStatus, at string) func() (string, string) {
	return func() (string, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.w.Last != nil {
			return s.busName(), "collect " + at + " (" + noAnswer(c.w.Last) + ")"
		}
		return "the rollouts of " + strings.Join(c.w.Missing, ", ") + " at " + at, ""
	}
}

// noAnswer words an error reading from the bus.
func noAnswer(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer"
	}
	return err.Error()
}
