package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// agentJSON is one agent in `agents list|show -o json`: what the harness can run, read
// from the published spec (the schema is documented in the running-agents guide).
type agentJSON struct {
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Owner         string   `json:"owner"`
	ModelProvider string   `json:"model_provider"`
	Model         string   `json:"model"`
	Sandbox       bool     `json:"sandbox"`
	Environment   string   `json:"environment"`
	CodeMode      bool     `json:"code_mode"`
	Skills        []string `json:"skills"`
	MCPServers    []string `json:"mcp_servers"`
}

// environmentJSON is one environment in `environments list -o json`.
type environmentJSON struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Owner    string `json:"owner"`
	Status   string `json:"status"`
	Snapshot string `json:"snapshot"`
	Image    string `json:"image"`
	CPU      int64  `json:"cpu"`
	MemoryGB int64  `json:"memory_gb"`
	DiskGB   int64  `json:"disk_gb"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// describeAgent reads one published agent. A spec that does not decode is shown by
// name with the reason as its description, so one bad row does not hide the others.
func describeAgent(row store.Agent) agentJSON {
	a := agentJSON{Name: row.Name, Owner: row.Owner, Skills: []string{}, MCPServers: []string{}}
	spec, err := agentspec.Decode(row.Spec)
	if err != nil {
		a.Description = "(stored spec is not valid: " + err.Error() + ")"
		return a
	}
	a.Description = deref(spec.Description)
	a.ModelProvider = spec.Model.Provider
	a.Model = deref(spec.Model.Name)
	a.Sandbox = spec.Sandbox.Enabled
	if a.Sandbox {
		a.Environment = row.Environment
		if a.Environment == "" {
			a.Environment = spec.Sandbox.Environment
		}
	}
	a.CodeMode = spec.CodeMode
	for _, sk := range spec.Skills {
		a.Skills = append(a.Skills, sk.Name)
	}
	for _, m := range spec.MCPServers {
		a.MCPServers = append(a.MCPServers, m.Name)
	}
	return a
}

func listAgents(ctx context.Context, st *store.Store) ([]agentJSON, error) {
	names, err := st.ListAgentNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]agentJSON, 0, len(names))
	for _, n := range names {
		row, err := st.GetAgent(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since the names were read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, describeAgent(row))
	}
	return out, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAgentsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "List the agents this harness can run"}
	var listOut outputFormat
	list := g.storeCmd("list", "List the published agents: model, sandbox, environment, Code Mode, skills", cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		as, err := listAgents(ctx, st)
		if err != nil {
			return err
		}
		return printList(cmd.OutOrStdout(), listOut, as, "AGENT\tMODEL\tSANDBOX\tENVIRONMENT\tCODE MODE\tSKILLS\tDESCRIPTION", func(tw io.Writer, a agentJSON) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, strings.TrimSuffix(a.ModelProvider+" "+a.Model, " "), onOff(a.Sandbox),
				orDash(a.Environment), onOff(a.CodeMode), orDash(strings.Join(a.Skills, ",")), clip(firstLine(a.Description), 60))
		})
	})
	addOutputFlag(list, &listOut, "")
	var showOut outputFormat
	show := g.storeCmd("show AGENT", "Show one published agent", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		name := cmd.Flags().Arg(0)
		row, err := st.GetAgent(ctx, name)
		if err != nil {
			return fmt.Errorf("agent %q: %w (list agents with `trueforge-harness agents list`)", name, err)
		}
		a := describeAgent(row)
		if showOut == outputJSON {
			return writeJSON(cmd.OutOrStdout(), a)
		}
		tw := newTable(cmd.OutOrStdout())
		for _, kv := range [][2]string{
			{"name", a.Name}, {"description", a.Description}, {"owner", a.Owner},
			{"model", strings.TrimSuffix(a.ModelProvider+" "+a.Model, " ")}, {"sandbox", onOff(a.Sandbox)},
			{"environment", orDash(a.Environment)}, {"code_mode", onOff(a.CodeMode)},
			{"skills", orDash(strings.Join(a.Skills, ", "))}, {"mcp_servers", orDash(strings.Join(a.MCPServers, ", "))},
		} {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
		return tw.Flush()
	})
	show.ValidArgsFunction = g.completeAgents
	addOutputFlag(show, &showOut, "")
	cmd.AddCommand(list, show)
	return cmd
}

func newEnvironmentsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "environments", Short: "List the environments agents run their sandboxes from"}
	var out outputFormat
	list := g.storeCmd("list", "List the published environments with their snapshot's status", cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		envs, err := st.ListEnvironments(ctx)
		if err != nil {
			return err
		}
		list := make([]environmentJSON, 0, len(envs))
		for _, e := range envs {
			status := "NoSnapshot"
			if e.SnapshotID != "" {
				if sn, err := st.GetSnapshot(ctx, e.SnapshotID); err == nil {
					status = sn.Status
				} else if errors.Is(err, store.ErrNotFound) {
					status = "SnapshotMissing"
				} else {
					return err
				}
			}
			list = append(list, environmentJSON{Name: e.Name, Provider: e.Provider, Owner: e.Owner, Status: status,
				Snapshot: e.SnapshotID, Image: e.Image, CPU: e.CPU, MemoryGB: e.MemoryGB, DiskGB: e.DiskGB})
		}
		return printList(cmd.OutOrStdout(), out, list, "ENVIRONMENT\tPROVIDER\tSTATUS\tSNAPSHOT\tOWNER", func(tw io.Writer, e environmentJSON) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Provider, e.Status, orDash(e.Snapshot), e.Owner)
		})
	})
	addOutputFlag(list, &out, "")
	cmd.AddCommand(list)
	return cmd
}
