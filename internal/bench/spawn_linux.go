package bench

import "syscall"

// childAttr puts the spawned Herald in its own process group, so a Ctrl-C
// at the terminal reaches the bench, which then stops the child in order,
// and has the kernel send the child SIGTERM if the bench dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
