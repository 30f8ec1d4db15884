package store

// migrationProvenance (20): where workspace files came from (issue 27, extract_archive).
// Placeholder until the feature lands: filled in by the work on archive extraction.
var migrationProvenance = migration{sql: onlyPostgres, postgres: `SELECT 1`}
