//go:build !linux

package daytonatest

// createBox creates a sandbox's box; off Linux sandboxes are host processes, which
// mount no volumes (they are validated and recorded only).
func (s *Server) createBox(bx box, id string, blockNetwork bool, _ []sandboxVolume) error {
	return bx.create(id, blockNetwork)
}
