package netd

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// PrepareNamespace readies a fresh network namespace for a sandbox: lo up, and ports
// from DNSPort up bindable without privileges, so netd can serve DNS on port 53 as the
// sandbox user. The namespace has nothing but lo, so that opens nothing to anyone
// outside it. It needs CAP_NET_ADMIN in the user namespace owning the network namespace
// (for example inside "unshare -Urn").
func PrepareNamespace() error {
	if err := LoopbackUp(); err != nil {
		return err
	}
	const knob = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
	if err := os.WriteFile(knob, []byte(strconv.Itoa(dnsPort)+"\n"), 0); err != nil {
		return fmt.Errorf("let the sandbox user bind port %d: %w", dnsPort, err)
	}
	return nil
}

// LoopbackUp brings lo up when it is down, as in a network namespace fresh from
// "unshare -n" (bubblewrap brings it up itself). It needs CAP_NET_ADMIN only when there
// is something to do.
func LoopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name[16], then a union whose first field is flags
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("loopback: get flags: %w", e)
	}
	flags := *(*uint16)(unsafe.Pointer(&ifr[16]))
	if flags&syscall.IFF_UP != 0 {
		return nil
	}
	*(*uint16)(unsafe.Pointer(&ifr[16])) = flags | syscall.IFF_UP | syscall.IFF_RUNNING
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("loopback: set up: %w", e)
	}
	return nil
}
