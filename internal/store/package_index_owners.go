package store

// migrationPackageIndexOwners (16): placeholder, replaced by the change that fills it in.
var migrationPackageIndexOwners = migration{sql: `SELECT 1`}
