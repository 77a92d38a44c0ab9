package reward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Bounds of the command transport.
const (
	maxLine    = 256 << 20       // longest answer line
	closeGrace = 5 * time.Second // from the end of stdin to a kill, at Close
	exitGrace  = 2 * time.Second // from the end of stdout to a kill, when it closed early
	tailLines  = 20              // stderr lines kept for error messages
)

// process is the command transport: one long-lived child speaking JSON lines.
type process struct {
	argv   []string
	stderr *lineWriter

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan []byte   // answer lines; closed when stdout ends
	readErr error         // why stdout ended, when not at EOF (read after lines closes)
	exited  chan struct{} // closed when the process has exited and its stderr is drained
	waitErr error         // the exit status (read after exited closes)
	broken  error         // set once the process is unusable; every later call returns it
	closed  bool
}

func newProcess(opts Options) *process {
	return &process{argv: opts.Command, stderr: &lineWriter{log: opts.Log}}
}

func (p *process) start(ctx context.Context) error {
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	if cmd.Err != nil {
		return fmt.Errorf("cannot start: %w", cmd.Err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	// Stdout is an os.Pipe of our own, so that Wait never closes it under the
	// reader and an answer written just before exiting is still read.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout = w
	cmd.Stderr = p.stderr
	cmd.WaitDelay = exitGrace // a grandchild holding stderr open cannot stall Wait
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("cannot start: %w", err)
	}
	w.Close()
	p.cmd, p.stdin = cmd, stdin
	p.lines = make(chan []byte)
	p.exited = make(chan struct{})
	go func() {
		defer r.Close()
		defer close(p.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		p.readErr = sc.Err()
	}()
	go func() {
		p.waitErr = cmd.Wait()
		p.stderr.flush()
		close(p.exited)
	}()
	return nil
}

// roundTrip writes body as one line and reads one answer line, within the
// timeout. Any failure leaves the process killed and the transport broken.
func (p *process) roundTrip(ctx context.Context, body []byte, timeout limit) ([]byte, error) {
	if p.broken != nil {
		return nil, p.broken
	}
	if p.cmd == nil || p.closed {
		return nil, errors.New("not running")
	}
	select {
	case l, ok := <-p.lines:
		if ok {
			return nil, p.fail(fmt.Errorf("wrote a line on stdout that answers no request: %s (stdout carries answers only; print anything else to stderr)", snippet(l)))
		}
		return nil, p.fail(p.ended("before the request"))
	default:
	}
	written := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(append(body, '\n'))
		written <- err
	}()
	timer := time.NewTimer(timeout.d)
	defer timer.Stop()
	wait := written
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return nil, p.fail(p.ended("without answering"))
			}
			if wait != nil {
				// The line can only come after the whole request was read.
				select {
				case <-wait:
				case <-timer.C:
					return nil, p.fail(fmt.Errorf("answered before reading the whole request, then stopped reading (no answer within %v)", timeout))
				}
			}
			return l, nil
		case err := <-wait:
			if err != nil {
				return nil, p.fail(p.ended(fmt.Sprintf("while hacrl wrote the request (%v)", err)))
			}
			wait = nil
		case <-timer.C:
			p.kill()
			return nil, p.fail(fmt.Errorf("no answer within %v; the process was killed%s", timeout, p.stderr.tail()))
		case <-ctx.Done():
			p.kill()
			return nil, p.fail(fmt.Errorf("cancelled while waiting for an answer: %w", ctx.Err()))
		}
	}
}

// ended describes a process whose stdout closed: its exit status (waiting a
// little for it, then killing it) and the end of its stderr.
func (p *process) ended(when string) error {
	select {
	case <-p.exited:
	case <-time.After(exitGrace):
		p.kill()
		<-p.exited
		return fmt.Errorf("closed its stdout %s and was killed%s", when, p.stderr.tail())
	}
	status := "exit status 0"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	if p.readErr != nil {
		return fmt.Errorf("stdout unreadable %s: %v; the process ended (%s)%s", when, p.readErr, status, p.stderr.tail())
	}
	return fmt.Errorf("exited (%s) %s%s", status, when, p.stderr.tail())
}

// fail marks the transport broken with err, killing the process.
func (p *process) fail(err error) error {
	p.kill()
	if p.broken == nil {
		p.broken = err
	}
	return err
}

func (p *process) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		select {
		case <-p.exited:
		default:
			killGroup(p.cmd)
		}
	}
}

// close ends the process's stdin, waits closeGrace for it to exit and kills
// it otherwise.
func (p *process) close() error {
	if p.cmd == nil || p.closed {
		return nil
	}
	p.closed = true
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(closeGrace):
		killGroup(p.cmd)
		<-p.exited
		return fmt.Errorf("did not exit within %v of the end of its input and was killed", closeGrace)
	}
	if p.broken == nil && p.waitErr != nil {
		return fmt.Errorf("exited with %v at the end of its input%s", p.waitErr, p.stderr.tail())
	}
	return nil
}

// lineWriter passes a process's stderr on line by line and keeps its last
// lines for error messages.
type lineWriter struct {
	log  func(string)
	mu   sync.Mutex
	part []byte
	last []string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := strings.IndexByte(string(w.part), '\n')
		if i < 0 {
			break
		}
		w.line(strings.TrimRight(string(w.part[:i]), "\r"))
		w.part = w.part[i+1:]
	}
	return len(b), nil
}

func (w *lineWriter) line(s string) {
	w.log(s)
	w.last = append(w.last, s)
	if len(w.last) > tailLines {
		w.last = w.last[len(w.last)-tailLines:]
	}
}

// flush passes on a last line without a newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.part) > 0 {
		w.line(string(w.part))
		w.part = nil
	}
}

// tail is the kept stderr lines as the end of an error message.
func (w *lineWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return "; it wrote nothing on stderr"
	}
	return "; its stderr ended with:\n    " + strings.Join(w.last, "\n    ")
}
