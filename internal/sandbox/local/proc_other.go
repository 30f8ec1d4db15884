//go:build !linux

package local

import (
	"errors"
	"os/exec"
)

// Builds need Linux namespaces; elsewhere the package compiles so that the provider
// does, and StartBuild says why it cannot build.
const buildsSupported = false

var errNoProc = errors.New("local builds need Linux")

func detach(*exec.Cmd)                     {}
func killGroup(int) error                  { return errNoProc }
func processStartTime(int) (uint64, error) { return 0, errNoProc }
func processAlive(int, uint64) bool        { return false }
