//! Small named values remembered across restarts (Telegram: when the last digest went out),
//! in the `meta` table.

use std::path::Path;

use rusqlite::{params, Transaction};

use super::schema::open_read_only;
use super::{sqlite, StoreError};

/// Sets `key` to `value`, replacing what it held ([`super::Msg::Meta`]).
pub(super) fn write(tx: &Transaction<'_>, key: &str, value: &str) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// A `meta` value written with [`super::Msg::Meta`]; `None` when never written.
pub fn meta(path: &Path, key: &str) -> Result<Option<String>, StoreError> {
    let conn = open_read_only(path)?;
    let mut stmt = conn
        .prepare("SELECT value FROM meta WHERE key = ?1")
        .map_err(sqlite(path))?;
    let mut rows = stmt.query(params![key]).map_err(sqlite(path))?;
    match rows.next().map_err(sqlite(path))? {
        Some(row) => row.get(0).map(Some).map_err(sqlite(path)),
        None => Ok(None),
    }
}
