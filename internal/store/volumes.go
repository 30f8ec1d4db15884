package store

// migrationVolumesRegistries (12): volumes and private registries (issue 17). Reserved
// here so that each feature's migration has a fixed number; until the feature lands it
// changes nothing.
var migrationVolumesRegistries = migration{sql: onlyPostgres, postgres: `SELECT 1`}
