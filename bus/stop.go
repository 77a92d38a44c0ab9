package bus

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stopping a run at one step. An agent that is interrupted asks every agent
// of the run to stop after a step: before it publishes its payload of that
// step, it stores a stop marker for the step (a message without a body on
// the step's subject for the agent, suffixed ".stop"). Since an agent stores
// its marker before its payload, an agent that holds every agent's payload
// of a step finds, by reading the step's markers then, every marker that
// will ever be stored for the step; so every agent that reads a step decides
// alike. A marker goes only on a step whose payload the agent has not
// published yet (Published): otherwise another agent may have read the step
// already, and the agent asks at its next step.
//
// Markers stay on the stream with their step. A session that resumes the
// run must not stop again at a step an earlier session stopped at: the
// reader passes the stream sequence its session started at (Sequence), and
// StopAsked counts only the markers stored after it.

// stopSuffix ends a stop marker's subject, after the step and agent tokens.
const stopSuffix = ".stop"

// Sequence returns the sequence number of the run's latest stored message
// (0 for an empty stream): a session that starts reading now passes it to
// StopAsked, which then counts only the stop markers stored later.
func (r *Run) Sequence(ctx context.Context) (uint64, error) {
	var seq uint64
	err := r.within(ctx, "read the step stream's sequence", func(ctx context.Context) error {
		info, err := r.stream.Info(ctx)
		if err != nil {
			return err
		}
		seq = info.State.LastSeq
		return nil
	})
	if err != nil {
		return 0, r.opErr(err, "read the step stream's sequence")
	}
	return seq, nil
}

// Published reports whether any part of agent's payload of step is on the
// stream.
func (r *Run) Published(ctx context.Context, step int, agent string) (bool, error) {
	if err := checkAgent(agent); err != nil {
		return false, err
	}
	found := false
	what := "look for agent " + strconv.Quote(agent) + "'s payload of step " + strconv.Itoa(step)
	err := r.within(ctx, what, func(ctx context.Context) error {
		_, err := r.stream.GetLastMsgForSubject(ctx, r.subject(step, agent))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return false, r.opErr(err, what)
	}
	return found, nil
}

// AskStop stores agent's request that every agent of the run stop after
// step. Call it before publishing agent's payload of step, and only when
// none of it is on the stream (Published): a marker stored after the
// payload may come too late for an agent that read the step already.
func (r *Run) AskStop(ctx context.Context, step int, agent string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	m := nats.NewMsg(r.subject(step, agent) + stopSuffix)
	m.Header.Set(hdrVersion, envelopeVersion)
	m.Header.Set(hdrAgent, agent)
	m.Header.Set(hdrStep, strconv.Itoa(step))
	what := "store agent " + strconv.Quote(agent) + "'s stop request at step " + strconv.Itoa(step)
	err := r.within(ctx, what, func(ctx context.Context) error {
		_, err := r.conn.js.PublishMsg(ctx, m, jetstream.WithExpectStream(streamName(r.id)))
		return err
	})
	if err != nil {
		return r.opErr(err, what)
	}
	return nil
}

// StopAsked returns the agents (sorted) that asked, with a marker stored
// after stream sequence `after`, that every agent stop after step. Read it
// once every agent's payload of step is there (Collect): then every agent
// that reads the step with the same `after` gets the same answer.
func (r *Run) StopAsked(ctx context.Context, step int, after uint64) ([]string, error) {
	what := "read the stop requests of step " + strconv.Itoa(step)
	var asked []string
	err := r.within(ctx, what, func(ctx context.Context) error {
		asked = asked[:0]
		info, err := r.stream.Info(ctx, jetstream.WithSubjectFilter(stepPrefix(r.id)+strconv.Itoa(step)+".*"+stopSuffix))
		if err != nil {
			return err
		}
		for subj := range info.State.Subjects {
			m, err := r.stream.GetLastMsgForSubject(ctx, subj)
			if err != nil {
				return err
			}
			if m.Sequence > after {
				asked = append(asked, m.Header.Get(hdrAgent))
			}
		}
		return nil
	})
	if err != nil {
		return nil, r.opErr(err, what)
	}
	slices.Sort(asked)
	return asked, nil
}
