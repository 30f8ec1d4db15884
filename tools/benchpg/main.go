// Command benchpg holds a throwaway PostgreSQL control plane for scripts/bench.sh: it
// starts a cluster as internal/pgtest does for the tests (initdb into a temporary
// directory, unix socket only, run as the unprivileged test account under root), creates
// a database, migrates it as its owner and sets up a team role with store.ApplyRoles, as
// the PostgreSQL guide does. It prints the team role's database URL on one line, then
// keeps the cluster until it is signalled (SIGTERM, SIGINT) or its parent process ends,
// and removes it:
//
//	benchpg >url-file &  ...  kill $!
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The bench's database and the role that plans, as a team member would.
const (
	database = "trueforge_bench"
	team     = "bench_team"
)

func main() {
	c, err := pgtest.Start()
	if err != nil {
		log.Fatalf("benchpg: starting PostgreSQL: %v", err)
	}
	defer c.Close()
	if err := setUp(context.Background(), c); err != nil {
		c.Close()
		log.Fatalf("benchpg: %v", err)
	}
	fmt.Println(c.URL(database, team))
	os.Stdout.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// A script killed outright cannot signal: then this process is handed to another
	// parent, and the cluster must not outlive the bench.
	parent := os.Getppid()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-sig:
			return
		case <-tick.C:
			if os.Getppid() != parent {
				return
			}
		}
	}
}

// setUp creates the control plane's database, migrates it as the superuser (its owner)
// and creates the team role.
func setUp(ctx context.Context, c *pgtest.Cluster) error {
	admin, err := c.CreateDatabase(database)
	if err != nil {
		return err
	}
	owner, err := store.Open(ctx, admin)
	if err != nil {
		return fmt.Errorf("migrating the bench database: %w", err)
	}
	defer owner.Close()
	if err := owner.ApplyRoles(ctx, store.TeamRole, team); err != nil {
		return fmt.Errorf("creating role %s: %w", team, err)
	}
	return nil
}
