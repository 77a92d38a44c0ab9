package main

import "syscall"

// childAttr puts an agent process in its own process group, so that a
// terminal's Ctrl-C reaches only hacrl train --processes, which passes one
// interrupt on; and makes it die with its supervisor, so that a supervisor
// killed without a chance to stop its children leaves none behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
