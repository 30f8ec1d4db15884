package store

// migrationRecipients (21): who may download an artifact given its classification
// (issue 27). Placeholder until the feature lands.
var migrationRecipients = migration{sql: onlyPostgres, postgres: `SELECT 1`}
