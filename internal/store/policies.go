package store

import "fmt"

// The row-level security that migrations give PostgreSQL's tables follows two
// patterns, written here once: a table whose rows belong to the role that wrote them,
// and writes allowed where a condition on another table holds. Each returns the very
// text its migrations were released with (a migration's text never changes).

// ownedRows is the row-level security of table: every role reads its rows, and only
// the role its owner column names (the one that wrote the row, current_user) inserts,
// updates and deletes them.
func ownedRows(table string) string {
	return fmt.Sprintf(`ALTER TABLE %[1]s ENABLE ROW LEVEL SECURITY;
CREATE POLICY %[1]s_read ON %[1]s FOR SELECT USING (true);
CREATE POLICY %[1]s_insert ON %[1]s FOR INSERT WITH CHECK (owner = current_user);
CREATE POLICY %[1]s_update ON %[1]s FOR UPDATE USING (owner = current_user) WITH CHECK (owner = current_user);
CREATE POLICY %[1]s_delete ON %[1]s FOR DELETE USING (owner = current_user);
`, table)
}

// writesWhere is the insert, update and delete policies of table that allow a write
// to a row where check holds: a condition on another table (the row's environment is
// the role's, its manifest was recorded by the role).
func writesWhere(table, check string) string {
	return fmt.Sprintf(`CREATE POLICY %[1]s_insert ON %[1]s FOR INSERT WITH CHECK (
	%[2]s);
CREATE POLICY %[1]s_update ON %[1]s FOR UPDATE
	USING (%[2]s)
	WITH CHECK (%[2]s);
CREATE POLICY %[1]s_delete ON %[1]s FOR DELETE
	USING (%[2]s);
`, table, check)
}
