package policy

// Allow is Decide in the shape the MCP toolset asks (mcptools.Decider): whether the
// call may go, which rule decided (-1 the default) and, when refused, why.
func (p *Policy) Allow(user, agent, tool string, args map[string]any) (bool, int, string) {
	d := p.Decide(Request{User: user, Agent: agent, Tool: tool, Args: args})
	return d.Allow, d.Rule, d.Reason
}
