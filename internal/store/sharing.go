package store

// migrationSharing (14): placeholder, replaced by the change that fills it in.
var migrationSharing = migration{sql: `SELECT 1`}
