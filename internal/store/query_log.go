package store

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// QueryLogEnv names a file to which every Store of the process appends "<store> <n>"
// after each statement it sends, n being its Queries so far: a measuring aid, with which
// scripts/bench.sh and the plan-cost test count what a plan costs a provider process
// that Terraform runs (the last line of each store is its total). Unset, nothing is
// written.
const QueryLogEnv = "TRUEFORGE_QUERY_LOG"

// queryLog appends a store's running query count to the QueryLogEnv file.
type queryLog struct {
	mu sync.Mutex
	f  *os.File
	id string // names the store: process id and when it was opened
}

// openQueryLog opens the file named by QueryLogEnv, or returns nil when it is unset or
// cannot be opened (a measuring aid never stops the store).
func openQueryLog() *queryLog {
	path := os.Getenv(QueryLogEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return &queryLog{f: f, id: fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano())}
}

func (l *queryLog) note(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s %d\n", l.id, n)
}

// count notes one statement (or transaction begin or commit) sent to the database.
func (d *db) count() {
	n := d.queries.Add(1)
	if d.log != nil {
		d.log.note(n)
	}
}
