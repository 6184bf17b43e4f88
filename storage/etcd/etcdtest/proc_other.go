//go:build !linux

package etcdtest

import "os/exec"

func setProcAttr(*exec.Cmd) {}
