//go:build !linux

package bench

import "syscall"

// childAttr is the default elsewhere: without /proc the bench cannot
// measure the child anyway.
func childAttr() *syscall.SysProcAttr { return nil }
