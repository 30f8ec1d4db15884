package store

// migrationVolumeSize (15): placeholder, replaced by the change that fills it in.
var migrationVolumeSize = migration{sql: `SELECT 1`}
