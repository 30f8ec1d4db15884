package netd

import (
	"net/netip"
	"sync"
)

// Synthetic addresses come from 198.18.0.0/15 (RFC 2544 benchmarking space, never routed
// and refused by the harness proxy), one per name, so a connection to an address can be
// mapped back to the name the program asked for.
var synthBase = netip.MustParseAddr("198.18.0.0")

const (
	synthSize = 1 << 17 // addresses in 198.18.0.0/15
	// MaxNames bounds the table; past it the oldest name's address is reused.
	MaxNames = 1 << 16
)

// names maps names to synthetic addresses and back.
type names struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	order  []string // allocation order, for eviction
	next   uint32
}

func newNames() *names {
	return &names{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: 1}
}

// addr returns name's address, allocating one.
func (n *names) addr(name string) netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a
	}
	if len(n.order) >= MaxNames {
		old := n.order[0]
		n.order = n.order[1:]
		delete(n.byAddr, n.byName[old])
		delete(n.byName, old)
	}
	var a netip.Addr
	for {
		off := n.next % synthSize
		n.next++
		if off == 0 || off == synthSize-1 {
			continue
		}
		b := synthBase.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + off
		a = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if _, used := n.byAddr[a]; !used {
			break
		}
	}
	n.byName[name] = a
	n.byAddr[a] = name
	n.order = append(n.order, name)
	return a
}

// name maps a synthetic address back; ok is false for any other address.
func (n *names) name(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.byAddr[a.Unmap()]
	return s, ok
}

// hostFor is the host to send to the harness for a target a program gave: a synthetic
// address becomes its name again; anything else is passed as given, for the harness to
// judge.
func (n *names) hostFor(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		if s, ok := n.name(a); ok {
			return s
		}
	}
	return h
}
