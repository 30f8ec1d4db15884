// Package configfile reads the operator's JSON files that the harness loads at start
// (the MCP call policy, the credentials file), so that each says the same way which
// file a mistake is in.
package configfile

import (
	"fmt"
	"os"
)

// Read returns what parse makes of the file at path. An error reading it is prefixed
// with what ("policy: open ..."); an error parsing it names the file, prefixed with
// named and the path ("policy /etc/trueforge/policy.json: ..."), since parse errors say
// only where in the file the mistake is.
func Read[T any](path, what, named string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	v, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", named, path, err)
	}
	return v, nil
}
