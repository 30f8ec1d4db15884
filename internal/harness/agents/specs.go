package agents

import (
	"fmt"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
)

// Specs keeps, for each agent, its stored spec as last read and what it decodes to (the
// harness's Spec and a scripted model's parsed replay), so that a server building an
// agent's runner for every message decodes a spec once per change instead of every time
// (issue 31: with the model's construction about a tenth of a millisecond per message).
//
// It caches nothing about whether the agent may run: Load reads the agent's row, its
// environment and snapshot every time, and compares the whole stored spec, so a changed
// row is decoded again at once and a deleted one is not found. The zero value is ready;
// it holds one entry per agent name it has loaded.
type Specs struct {
	mu     sync.Mutex
	byName map[string]*decodedSpec
}

// decodedSpec is what one stored spec decodes to.
type decodedSpec struct {
	raw    string
	spec   Spec
	script *scripted.Script // nil unless the model is scripted and its replay parses
}

// decode returns what raw, the stored spec of agent name, decodes to: the entry kept
// for the agent when it was decoded from the same bytes, else a new decoding, kept when
// it succeeds (c nil: never kept).
func (c *Specs) decode(name string, raw []byte) (*decodedSpec, error) {
	if c != nil {
		c.mu.Lock()
		d := c.byName[name]
		c.mu.Unlock()
		if d != nil && d.raw == string(raw) {
			return d, nil
		}
	}
	d, err := decodeSpec(name, raw)
	if err != nil || c == nil {
		return d, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = make(map[string]*decodedSpec)
	}
	c.byName[name] = d
	return d, nil
}

// decodeSpec decodes and checks an agent's stored spec.
func decodeSpec(name string, raw []byte) (*decodedSpec, error) {
	spec, err := agentspec.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("agent %q: the stored spec is not valid JSON (apply the configuration again to rewrite it): %w", name, err)
	}
	// The row may have been written past terraform (psql, another writer): it gets no
	// more than a configuration could, and nothing runs until it is fixed.
	if err := checkBounds(name, spec); err != nil {
		return nil, err
	}
	d := &decodedSpec{raw: string(raw), spec: SpecOf(spec)}
	if d.spec.Model.Provider == agentspec.ModelScripted {
		// A replay that does not parse is left to NewModel, which says what is wrong.
		d.script, _ = scripted.Parse([]byte(d.spec.Model.Script))
	}
	return d, nil
}
