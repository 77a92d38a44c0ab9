//go:build unix

package reward

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the command in a process group of its own: a Ctrl-C at the
// terminal reaches hacrl only (which finishes its step, still needing the
// reward), and a kill reaches the command's children too.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the command's process group.
func killGroup(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		cmd.Process.Kill()
	}
}
