package agents

import (
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// checkBounds refuses a stored spec past the bounds the provider enforces
// (agentspec.Spec.CheckBounds), before anything of the agent runs. The error is
// ErrNotReady to callers (the API answers 422) and says what to apply.
func checkBounds(name string, s agentspec.Spec) error {
	if err := s.CheckBounds(); err != nil {
		return outOfBounds{fmt.Errorf("agent %q cannot run: its stored %w", name, err)}
	}
	return nil
}

// outOfBounds is a spec past the provider's bounds: not ready to run.
type outOfBounds struct{ err error }

func (e outOfBounds) Error() string      { return e.err.Error() }
func (e outOfBounds) Unwrap() error      { return e.err }
func (outOfBounds) Is(target error) bool { return target == ErrNotReady }
