//go:build !unix

package daytonatest

import "os/exec"

func killGroup(*exec.Cmd) {}
