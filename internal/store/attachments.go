package store

// migrationAttachments (19): files a user gives a session (issue 27). Placeholder.
var migrationAttachments = migration{sql: onlyPostgres, postgres: `SELECT 1`}
