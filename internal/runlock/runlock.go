// Package runlock makes a directory belong to one process at a time: the
// output directory of a training run is locked for the run's whole life, so
// that a second run pointed at it is refused instead of mixing its files with
// the first one's.
//
// The lock is an operating-system advisory lock (flock on Unix, LockFileEx on
// Windows) on the file DIR/.hacrl.lock. The kernel drops it when the holding
// process exits for any reason, SIGKILL and power loss included, so a lock
// can never outlive its holder: a lock left by a killed process is stale by
// construction and the next Acquire simply takes it. The file itself stays in
// the directory; its content names the holder (process id, host, start time,
// command line), so that a refused process can say who is in the way. Release
// empties it; a file still naming a holder when Acquire succeeds therefore
// tells of a holder that ended without releasing (Lock.Stale).
//
// Do not delete the lock file while a run holds it: a process that opens the
// new file would not see the old lock. On platforms with neither flock nor
// LockFileEx (not Unix or Windows), Acquire succeeds without excluding anyone.
package runlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileName is the lock file inside the locked directory.
const FileName = ".hacrl.lock"

// Holder identifies the process that holds (or held) a lock.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Start   time.Time `json:"start"`
	Command []string  `json:"command"`
}

// String is the holder as one line: pid 123 on host h, started at …, running "cmd".
func (h *Holder) String() string {
	s := fmt.Sprintf("pid %d on host %s, started %s", h.PID, h.Host, h.Start.Local().Format("2006-01-02 15:04:05"))
	if len(h.Command) > 0 {
		s += fmt.Sprintf(", command %q", strings.Join(h.Command, " "))
	}
	return s
}

// HeldError is Acquire's error when another process holds the lock.
type HeldError struct {
	Dir string
	// Holder is the holder the lock file names; nil when it could not be read
	// (a holder that has just taken the lock and not yet written it).
	Holder *Holder
}

func (e *HeldError) Error() string {
	who := "another process (not yet identified)"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	return fmt.Sprintf("%s is in use by another run: %s; wait for it to end or stop it (lock %s)",
		e.Dir, who, filepath.Join(e.Dir, FileName))
}

// Lock is a held lock. Release it when done; it is released anyway when the
// process ends.
type Lock struct {
	f    *os.File
	path string
	// Stale is the holder a previous lock file named, when that holder ended
	// without releasing the lock (killed, crashed); nil otherwise.
	Stale *Holder
}

// Acquire locks dir (which must exist) for this process without waiting.
// When another process holds the lock it returns a *HeldError naming that
// process.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errHeld) {
			return nil, &HeldError{Dir: dir, Holder: readHolder(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f, path: path, Stale: readHolder(path)}
	if err := l.write(); err != nil {
		l.Release()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return l, nil
}

// write records this process as the holder.
func (l *Lock) write() error {
	host, _ := os.Hostname()
	data, err := json.Marshal(Holder{PID: os.Getpid(), Host: host, Start: time.Now().UTC().Truncate(time.Second), Command: os.Args})
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(append(data, '\n'), 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// Release empties the lock file (so that the next holder does not take this
// one for stale) and unlocks it. It is safe to call more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	terr := l.f.Truncate(0)
	uerr := unlock(l.f)
	cerr := l.f.Close()
	l.f = nil
	if err := errors.Join(terr, uerr, cerr); err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// readHolder reads the holder a lock file names, or nil if it names none.
func readHolder(path string) *Holder {
	data, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(data, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}

// errHeld is tryLock's error when another open file holds the lock.
var errHeld = errors.New("held by another process")
