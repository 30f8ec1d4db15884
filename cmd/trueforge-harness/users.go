package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// newUsersCmd is `trueforge-harness users`: the people (or programs) who use the HTTP
// API that `serve` serves, each with an API token. Every change is recorded in the admin
// audit log, with the caller (--owner, the OS user, or on PostgreSQL the role) as actor.
func newUsersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the HTTP API's users and their tokens",
		Long: "Users call the HTTP API that `trueforge-harness serve` serves, with `Authorization: Bearer <token>`; a user's\n" +
			"name owns the sessions it starts. A token is shown once, when it is made, and stored only as its SHA-256.\n" +
			"User names follow PostgreSQL role names here: lower-case letters, digits and _, at most 63, starting with a\n" +
			"letter or _. See docs/guides/http-api.md.",
	}
	var admin bool
	add := g.storeCmd("add NAME [--admin]", "Add a user and print its API token, once", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		name := cmd.Flags().Arg(0)
		if err := store.CheckUserName(name); err != nil {
			return err
		}
		token, hash, err := api.NewToken()
		if err != nil {
			return err
		}
		if err := st.CreateUser(ctx, name, admin, hash); err != nil {
			if errors.Is(err, store.ErrAlreadyExists) {
				return fmt.Errorf("user %q exists already; `trueforge-harness users token %s` gives it a new token", name, name)
			}
			return err
		}
		role := "user"
		if admin {
			role = "admin"
		}
		g.audit(ctx, cmd, st, store.AuditUserAdd, name, "added as "+role+" with the CLI")
		fmt.Fprintf(cmd.ErrOrStderr(), "added %s %q. Its API token follows; it is shown only now (the harness keeps only its hash):\n", role, name)
		fmt.Fprintln(cmd.OutOrStdout(), token)
		return nil
	})
	add.Flags().BoolVar(&admin, "admin", false, "an admin: lists and deletes every user's sessions, reads the audit log and /metrics")

	rotate := g.storeCmd("token NAME", "Give a user a new API token (the old one and its web logins stop working at once) and print it, once", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		name := cmd.Flags().Arg(0)
		token, hash, err := api.NewToken()
		if err != nil {
			return err
		}
		ended, err := st.SetUserToken(ctx, name, hash)
		if err != nil {
			return noSuchUser(name, err)
		}
		g.audit(ctx, cmd, st, store.AuditUserToken, name, fmt.Sprintf("token rotated with the CLI; %d web logins ended", ended))
		fmt.Fprintf(cmd.ErrOrStderr(), "user %q has a new API token; the old one no longer works, and its %d web logins ended. The token follows, shown only now:\n", name, ended)
		fmt.Fprintln(cmd.OutOrStdout(), token)
		return nil
	})

	var output outputFormat
	list := g.storeCmd("list [-o table|json]", "List the users", cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		users, err := st.ListUsers(ctx)
		if err != nil {
			return err
		}
		type userJSON struct {
			Name           string    `json:"name"`
			Admin          bool      `json:"admin"`
			CreatedAt      time.Time `json:"created_at"`
			TokenRotatedAt time.Time `json:"token_rotated_at"`
		}
		list := make([]userJSON, 0, len(users))
		for _, u := range users {
			list = append(list, userJSON{u.Name, u.Admin, u.CreatedAt.UTC(), u.TokenRotatedAt.UTC()})
		}
		return printList(cmd.OutOrStdout(), output, list, "NAME\tADMIN\tCREATED\tTOKEN ROTATED", func(tw io.Writer, u userJSON) {
			adm := "no"
			if u.Admin {
				adm = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, adm, u.CreatedAt.Format(time.RFC3339), u.TokenRotatedAt.Format(time.RFC3339))
		})
	})
	addOutputFlag(list, &output, "")

	remove := g.storeCmd("remove NAME", "Remove a user: its token and its web logins stop working at once (its sessions stay)", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
		name := cmd.Flags().Arg(0)
		logins, _ := st.CountLogins(ctx, name)
		if err := st.DeleteUser(ctx, name); err != nil {
			return noSuchUser(name, err)
		}
		g.audit(ctx, cmd, st, store.AuditUserRemove, name, fmt.Sprintf("removed with the CLI; %d web logins ended", logins))
		fmt.Fprintf(cmd.OutOrStdout(), "removed user %q: its token no longer works and its %d web logins ended. Its sessions stay, owned by %q (an admin deletes them with DELETE /api/v1/sessions/ID)\n",
			name, logins, name)
		return nil
	})
	cmd.AddCommand(add, rotate, list, remove)
	return cmd
}

// audit records a user change made with the CLI; the change stands even if the log
// does not take it, which is said.
func (g *globals) audit(ctx context.Context, cmd *cobra.Command, st *store.Store, action, target, detail string) {
	actor, err := g.identity(st)
	if err != nil || actor == "" {
		actor = "unknown"
	}
	if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: actor, Action: action, Target: target, Detail: detail}); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the change was made, but the audit log did not take it: %v\n", err)
	}
}

// noSuchUser is err of a store call on user name, which says how to find the users when
// there is no such user.
func noSuchUser(name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no user %q; `trueforge-harness users list` lists them", name)
	}
	return err
}
