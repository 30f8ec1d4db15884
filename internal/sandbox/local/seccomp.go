//go:build linux

package local

import (
	"encoding/binary"
	"syscall"
)

// The seccomp filters of every sandboxed command, classic BPF programs generated here,
// with no libseccomp. There are two, stacked (the kernel runs every filter a process has
// and the most restrictive answer wins, so a later filter only narrows):
//
//   - the base filter (seccompProgram) denies with EPERM ptrace, process_vm_readv/writev
//     and pidfd_getfd (another process's memory and descriptors), keyctl/add_key/
//     request_key, bpf, io_uring, mount and the new mount API, pivot_root, unshare, setns
//     and clone with any namespace flag. clone3 fails with ENOSYS, so that libc falls
//     back to clone, whose flags can be inspected. A foreign architecture (an x86-64
//     process making x32 or i386 calls) is killed.
//   - the AF_UNIX filter (seccompUnixProgram) denies new AF_UNIX sockets, so that a
//     command cannot reach host sockets it might find.
//
// The sandbox's init installs the base filter on itself (all threads) before it starts
// the egress helper, which therefore runs under it; it adds the AF_UNIX filter once the
// helper is started (the helper must create AF_UNIX sockets to reach the bound egress
// socket), and every command it starts afterwards inherits both.

const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	retAllow   = 0x7fff0000
	retErrno   = 0x00050000
	retKillPro = 0x80000000

	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on little-endian architectures

	cloneNSFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC |
		syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | 0x02000000 // CLONE_NEWCGROUP

	// Numbers shared by every architecture since Linux 5.1.
	sysIOUringSetup    = 425
	sysIOUringEnter    = 426
	sysIOUringRegister = 427
	sysOpenTree        = 428
	sysMoveMount       = 429
	sysFsopen          = 430
	sysFsconfig        = 431
	sysFsmount         = 432
	sysFspick          = 433
	sysClone3          = 435
	sysMountSetattr    = 442
	sysPidfdGetfd      = 438
)

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram returns the base filter in the kernel's struct sock_filter layout, or
// nil when this architecture has no syscall table here.
func seccompProgram() []byte {
	a := seccompArchTable
	if a.audit == 0 {
		return nil
	}
	eperm := retErrno | uint32(syscall.EPERM)
	p := seccompPrologue(a)
	deny := append([]uint32{sysIOUringSetup, sysIOUringEnter, sysIOUringRegister, sysOpenTree,
		sysMoveMount, sysFsopen, sysFsconfig, sysFsmount, sysFspick, sysMountSetattr, sysPidfdGetfd}, a.deny...)
	for _, nr := range deny {
		p = append(p, bpfInsn{bpfJeqK, 0, 1, nr}, bpfInsn{bpfRetK, 0, 0, eperm})
	}
	p = append(p,
		bpfInsn{bpfJeqK, 0, 1, sysClone3}, bpfInsn{bpfRetK, 0, 0, retErrno | uint32(syscall.ENOSYS)},
		// clone(flags with a namespace, ...)
		bpfInsn{bpfJeqK, 0, 4, a.clone},
		bpfInsn{bpfLdWAbs, 0, 0, offArg0},
		bpfInsn{bpfJsetK, 0, 1, cloneNSFlags},
		bpfInsn{bpfRetK, 0, 0, eperm},
		bpfInsn{bpfRetK, 0, 0, retAllow},
		bpfInsn{bpfRetK, 0, 0, retAllow},
	)
	return encodeBPF(p)
}

// seccompUnixProgram returns the filter stacked on the base one for the commands: it
// denies socket(AF_UNIX, ...) and allows everything else (which the base filter has
// judged already). nil when this architecture has no syscall table here.
func seccompUnixProgram() []byte {
	a := seccompArchTable
	if a.audit == 0 {
		return nil
	}
	p := append(seccompPrologue(a),
		bpfInsn{bpfJeqK, 0, 4, a.socket},
		bpfInsn{bpfLdWAbs, 0, 0, offArg0},
		bpfInsn{bpfJeqK, 0, 1, syscall.AF_UNIX},
		bpfInsn{bpfRetK, 0, 0, retErrno | uint32(syscall.EPERM)},
		bpfInsn{bpfRetK, 0, 0, retAllow},
		bpfInsn{bpfRetK, 0, 0, retAllow},
	)
	return encodeBPF(p)
}

// seccompPrologue kills a foreign architecture (and, where the x32 ABI shares the audit
// id, its numbers), then loads the system call number.
func seccompPrologue(a seccompArch) []bpfInsn {
	p := []bpfInsn{
		{bpfLdWAbs, 0, 0, offArch},
		{bpfJeqK, 1, 0, a.audit},
		{bpfRetK, 0, 0, retKillPro},
		{bpfLdWAbs, 0, 0, offNr},
	}
	if a.x32 {
		p = append(p, bpfInsn{bpfJgeK, 0, 1, 0x40000000}, bpfInsn{bpfRetK, 0, 0, retKillPro})
	}
	return p
}

// encodeBPF lays p out as the kernel's struct sock_filter array.
func encodeBPF(p []bpfInsn) []byte {
	out := make([]byte, 0, 8*len(p))
	for _, in := range p {
		out = binary.LittleEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.LittleEndian.AppendUint32(out, in.k)
	}
	return out
}

// seccompArch holds an architecture's audit id and syscall numbers.
type seccompArch struct {
	audit  uint32
	x32    bool // the x32 ABI shares the audit id: deny its numbers
	socket uint32
	clone  uint32
	// seccomp(2), with which the sandbox's init installs the filters on itself
	seccomp uint32
	// ptrace, process_vm_readv, process_vm_writev, keyctl, add_key, request_key, bpf,
	// mount, umount2, pivot_root, unshare, setns
	deny []uint32
}
