package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// Shell completion (cobra's `completion bash|zsh|fish|powershell`) completes agent names
// and the caller's session ids from the control-plane database, read with the
// --database-url and --owner already typed. A database that cannot be opened
// completes nothing rather than printing an error into the shell.

// completeAgents completes the first argument with the published agents' names.
func (g *globals) completeAgents(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	g.withCompletionStore(cmd, func(st *store.Store, _ string) {
		all, _ := st.ListAgentNames(context.Background())
		for _, n := range all {
			// A name written past the provider's checks with control characters is
			// not offered: the shell would insert it raw, and it cannot be typed.
			if termsafe.Line(n) == n {
				names = append(names, n)
			}
		}
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeSessions completes the first argument with the caller's session ids, each
// with its agent as the description.
func (g *globals) completeSessions(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return g.sessionIDs(cmd), cobra.ShellCompDirectiveNoFileComp
}

// completeSessionFlag completes --session.
func (g *globals) completeSessionFlag(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return g.sessionIDs(cmd), cobra.ShellCompDirectiveNoFileComp
}

func (g *globals) sessionIDs(cmd *cobra.Command) []string {
	var ids []string
	g.withCompletionStore(cmd, func(st *store.Store, me string) {
		ss, err := st.ListSessions(context.Background(), me, "")
		if err != nil {
			return
		}
		for _, s := range ss {
			ids = append(ids, s.ID+"\t"+termsafe.Line(s.Agent))
		}
	})
	return ids
}

func (g *globals) withCompletionStore(cmd *cobra.Command, fn func(st *store.Store, me string)) {
	ctx := cmd.Context()
	if ctx == nil { // cobra's __complete does not always hand its context down
		ctx = context.Background()
	}
	st, err := store.Open(ctx, g.databaseURL)
	if err != nil {
		return
	}
	defer st.Close()
	me, err := g.identity(st)
	if err != nil {
		return
	}
	fn(st, me)
}
