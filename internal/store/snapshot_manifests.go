package store

// migrationSupplyChain (13): snapshot manifests and artifact lineage (issue 18). Reserved
// here so that each feature's migration has a fixed number; until the feature lands it
// changes nothing.
var migrationSupplyChain = migration{sql: onlyPostgres, postgres: `SELECT 1`}
