//go:build linux

package local

var seccompArchTable = seccompArch{
	audit: 0xc000003e, x32: true, socket: 41, clone: 56, seccomp: 317,
	deny: []uint32{101, 310, 311, 250, 248, 249, 321, 165, 166, 155, 272, 308},
}
