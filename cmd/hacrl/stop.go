package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/hacrl/hacrl/bus"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/pflag"
)

// An interrupted run of agent processes stops every agent after the same
// step, whichever agent was interrupted and wherever it runs: the agents
// agree on the step through the bus (package bus, stop.go). An interrupted
// agent asks with the next step whose rollouts it has not published yet;
// every agent reads a step's requests once it has every agent's rollouts of
// the step, so all read the same, finish that step, checkpoint and exit with
// status 130. A request counts only in the session it was made in: a
// session starts when hacrl train --processes opens its bus (its agents,
// restarted ones too, get that moment with --session-start) or, for an
// agent started alone, when it joins the bus. So a run resumed after a stop
// at step s goes past s, also in an agent that replays s from an older
// checkpoint.

// agentSession is how hacrl train --processes hands an agent process its
// session and its interrupts (hidden flags of hacrl agent).
type agentSession struct {
	// start is the stream sequence the session started at; -1: this
	// process starts its own session when it joins.
	start int64
	// stopFD is a file descriptor the supervisor writes to or closes to
	// interrupt the agent; -1: none. A pipe cannot lose an interrupt that
	// comes before the process is ready for signals, as a signal can.
	stopFD int
}

func (s *agentSession) register(f *pflag.FlagSet) {
	f.Int64Var(&s.start, "session-start", -1, "the bus stream sequence the session of a run of agent processes started at (hacrl train --processes)")
	f.IntVar(&s.stopFD, "stop-fd", -1, "a file descriptor whose end or first byte interrupts this agent (hacrl train --processes)")
	f.MarkHidden("session-start")
	f.MarkHidden("stop-fd")
}

// interrupts returns ctx cancelled also by the supervisor's stop pipe, if
// any, saying so on stderr when it comes.
func (s *agentSession) interrupts(ctx context.Context, stderr io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if s.stopFD < 0 {
		return ctx, cancel
	}
	f := os.NewFile(uintptr(s.stopFD), "stop pipe")
	go func() {
		// A byte or the end (the supervisor gone): an interrupt.
		if _, err := f.Read(make([]byte, 1)); err != nil && err != io.EOF {
			fmt.Fprintf(stderr, "--stop-fd %d: %v (interrupts now come only as signals)\n", s.stopFD, err)
			return
		}
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "\ninterrupt (from hacrl train --processes): %s\n", agentOnInterrupt)
			cancel()
		}
	}()
	return ctx, cancel
}

// agentOnInterrupt is what an agent process does on an interrupt.
const agentOnInterrupt = "asking every agent of the run to stop after the same step, and saving a checkpoint there"

// since is the stream sequence after which stop requests count for this
// process: its session's start, or now.
func (s *agentSession) since(ctx context.Context, run *bus.Run) (uint64, error) {
	if s.start >= 0 {
		return uint64(s.start), nil
	}
	return run.Sequence(ctx)
}

// args are the hidden flags that give an agent process this session.
func (s *agentSession) args() []string {
	return []string{"--session-start", strconv.FormatInt(s.start, 10), "--stop-fd", strconv.Itoa(s.stopFD)}
}

// stoppingExchange is train.Exchange over a run on the bus with its stop
// agreement: a busExchange whose Share also carries stop requests.
type stoppingExchange struct {
	ex    *busExchange
	since uint64           // stop requests stored after this stream sequence count
	log   func(msg string) // says when this agent asks
}

func (e *stoppingExchange) Share(ctx context.Context, step int, agent string, payload []byte, stop bool) (map[string][]byte, []string, error) {
	s := step - train.SetupStep
	if stop {
		// A request goes on the stream before the payload, and only with a
		// step whose payload is new: one published before (a restarted
		// process replaying it) may have been read already.
		published, err := e.ex.run.Published(ctx, s, agent)
		if err != nil {
			return nil, nil, err
		}
		if !published {
			if err := e.ex.run.AskStop(ctx, s, agent); err != nil {
				return nil, nil, err
			}
			e.log(fmt.Sprintf("interrupted: asked every agent of the run to stop after step %d", step+1))
		}
	}
	got, err := e.ex.Share(ctx, step, agent, payload)
	if err != nil || step == train.SetupStep {
		return got, nil, err
	}
	// Every agent's payload of the step is there, so is every request that
	// can count at it.
	by, err := e.ex.run.StopAsked(ctx, s, e.since)
	if err != nil {
		return nil, nil, err
	}
	return got, by, nil
}

func (e *stoppingExchange) Keep(ctx context.Context, agent string, from int) error {
	return e.ex.Keep(ctx, agent, from)
}
