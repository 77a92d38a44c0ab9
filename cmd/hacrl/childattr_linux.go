package main

import "syscall"

// childAttr makes an agent process die with hacrl train --processes: a
// supervisor killed without a chance to stop its children leaves none behind
// to train on alone.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
