package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// newDBCmd is `trueforge-harness db`: what the owner of a PostgreSQL control plane runs
// to set it up (docs/guides/postgres.md).
func newDBCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Set up the control-plane database: migrate its schema, create team and harness roles",
	}
	cmd.AddCommand(newDBMigrateCmd(g), newDBRolesCmd(g))
	return cmd
}

func newDBMigrateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the control-plane database's schema to this release's version, and print it",
		Long: "Connects to --database-url and applies the migrations its schema lacks, under a lock, so that\n" +
			"concurrent runs migrate once. On PostgreSQL, run it as the database's owner (the role that owns the\n" +
			"tables), which team and harness roles are not: they cannot change the schema. It also grants the\n" +
			"trueforge group roles the tables a migration added. A database newer than this release is refused.",
		Args: cobra.NoArgs,
		RunE: g.withStore(func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
			v, err := st.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			as := ""
			if st.Role() != "" {
				as = ", as role " + st.Role()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "control-plane database (%s%s) is at schema version %d, the latest this release knows\n", st.Dialect(), as, v)
			return nil
		}),
	}
}

func newDBRolesCmd(g *globals) *cobra.Command {
	var team, harnessName string
	var apply bool
	cmd := &cobra.Command{
		Use:   "roles (--team NAME | --harness NAME) [--apply]",
		Short: "Print (or, with --apply, run) the SQL that sets up a team's or a harness's PostgreSQL role",
		Long: "A team role (one per person or CI pipeline that applies configuration) reads the whole published\n" +
			"configuration and writes only its own rows; a harness role reads agents, environments and secrets\n" +
			"and owns sessions. The SQL creates the group roles trueforge_team and trueforge_harness with their\n" +
			"grants on the control plane's tables when missing, then login role NAME (without a password) as a\n" +
			"member of its group. It is printed for the schema --database-url connects to; review it, give the\n" +
			"role a credential, and run it as the database's owner with CREATEROLE, or pass --apply to run it\n" +
			"now as the role in --database-url.",
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			_, _, err := roleFlags(team, harnessName)
			return err
		},
		RunE: g.withStore(func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
			kind, name, _ := roleFlags(team, harnessName)
			if !st.Shared() {
				return errors.New("roles exist only on PostgreSQL, and --database-url names an SQLite file, where the owner is what each " +
					"caller names (--owner, TRUEFORGE_OWNER). Pass the postgres:// URL of the control plane's database, as its owner")
			}
			if apply {
				if err := st.ApplyRoles(ctx, kind, name); err != nil {
					return fmt.Errorf("%w (run it as the database's owner, with CREATEROLE, or print the SQL without --apply and have an administrator run it)", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s role %s is set up; give it a credential (ALTER ROLE %s PASSWORD '...', or as your server authenticates)\n", kind, name, name)
				return nil
			}
			schema, err := st.Schema(ctx)
			if err != nil {
				return err
			}
			q, err := store.RolesSQL(schema, kind, name)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), q)
			return nil
		}),
	}
	cmd.Flags().StringVar(&team, "team", "", "login role of a team or CI pipeline that applies configuration")
	cmd.Flags().StringVar(&harnessName, "harness", "", "login role of a harness that runs agents")
	cmd.Flags().BoolVar(&apply, "apply", false, "run the SQL now, as the role in --database-url, instead of printing it")
	return cmd
}

// roleFlags is the kind and name of the role that --team or --harness names: exactly
// one of them.
func roleFlags(team, harnessName string) (store.RoleKind, string, error) {
	switch {
	case team != "" && harnessName != "":
		return "", "", errors.New("pass either --team or --harness, not both: a role either applies configuration or runs agents")
	case team != "":
		return store.TeamRole, team, nil
	case harnessName != "":
		return store.HarnessRole, harnessName, nil
	}
	return "", "", errors.New("name the role: --team NAME for a team or CI pipeline that applies configuration, --harness NAME for a harness that runs agents")
}

// withStore is a command body that runs with the control-plane database open (and so
// migrated) and closed after; it does not need the harness's runtimes.
func (g *globals) withStore(fn func(ctx context.Context, cmd *cobra.Command, st *store.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, err := store.Open(ctx, g.databaseURL)
		if err != nil {
			return fmt.Errorf("opening the control-plane database: %w", err)
		}
		defer st.Close()
		return fn(ctx, cmd, st)
	}
}
