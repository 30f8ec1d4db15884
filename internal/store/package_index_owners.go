package store

// migrationPackageIndexOwners (16): who may change a snapshot's manifest and its package
// index (issue 23). Migration 13 granted both tables to every team like snapshots,
// without row-level security, so any team could delete another team's rows of
// snapshot_packages and the advisory query (AffectedBy, `snapshots affected`) then missed
// that team's snapshot while its manifest's digest stayed intact.
//
// Who writes: the role that recorded the manifest (recorded_by, the connection's role,
// set by the database so that nobody records in another's name). A snapshot is shared
// by every environment with the same build inputs, and the manifest is taken once, by
// the first apply that sees the build turn Ready (builds.recordManifest), which may be
// any team's; so "the owner of an environment on the snapshot" would refuse the apply
// that legitimately records it before its environment row points there, and the harness
// never records one. The recorder, and only it, may replace or delete the manifest and
// the package rows of its snapshot; every role reads both; a package row may be
// inserted only beside a manifest its role recorded. Manifests recorded before this
// migration belong to the migrating role (the database's owner), which teams are not.
// The rows still go with their snapshot (ON DELETE CASCADE), and a snapshot an
// environment uses cannot be deleted (environments.snapshot_id references it).
//
// What stays open: the first recorder is trusted for what the manifest says; a team
// sharing a snapshot through identical build inputs could record a false one first.
//
// SQLite has one operator: the column is added for one schema and left empty.
var migrationPackageIndexOwners = migration{
	sql: `ALTER TABLE snapshot_manifests ADD COLUMN recorded_by TEXT NOT NULL DEFAULT '';`,
	postgres: `
ALTER TABLE snapshot_manifests ADD COLUMN recorded_by TEXT NOT NULL DEFAULT current_user;
ALTER TABLE snapshot_manifests ENABLE ROW LEVEL SECURITY;
CREATE POLICY snapshot_manifests_read ON snapshot_manifests FOR SELECT USING (true);
CREATE POLICY snapshot_manifests_insert ON snapshot_manifests FOR INSERT WITH CHECK (recorded_by = current_user);
CREATE POLICY snapshot_manifests_update ON snapshot_manifests FOR UPDATE
	USING (recorded_by = current_user) WITH CHECK (recorded_by = current_user);
CREATE POLICY snapshot_manifests_delete ON snapshot_manifests FOR DELETE USING (recorded_by = current_user);

ALTER TABLE snapshot_packages ENABLE ROW LEVEL SECURITY;
CREATE POLICY snapshot_packages_read ON snapshot_packages FOR SELECT USING (true);
` + writesWhere("snapshot_packages",
		`EXISTS (SELECT 1 FROM snapshot_manifests m WHERE m.snapshot_id = snapshot_packages.snapshot_id AND m.recorded_by = current_user)`)}
