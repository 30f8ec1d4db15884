package egress

import "net"

// RelayBare is relay with no limit and nothing sent first: the tunnel's byte moving
// alone, without the proxy's handshake, policy or accounting, for the floor path of
// BenchmarkDownload100MB.
func RelayBare(client, upstream net.Conn) {
	relay(client, upstream, noLimit, func() (int64, error) { return 0, nil })
}
