//! A local queue moved whole (`labrouter task export|import`, README "Moving a queue"):
//! every task read out with its request and idempotency key, and a file's tasks written in
//! one transaction, after every id and key was found free, or none at all.

use std::path::Path;

use bytes::Bytes;
use rusqlite::{params, OptionalExtension, Transaction};

use super::read::{has_table, read_at, row};
use super::{insert_task, Idem, COLUMNS};
use crate::store::{schema, sqlite, StoreError};
use crate::task::Task;

/// A task as it moves between queues: the task, its request body (while it is unfinished)
/// and the Idempotency-Key that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Moved {
    pub task: Task,
    pub request: Option<Bytes>,
    pub idem: Option<Idem>,
}

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A router has the store open: its queue in memory would never see the import.
    #[error("a router has the state store {0} open: stop it first (its queue would not see imported tasks)")]
    RouterRunning(String),
    /// Tasks or keys the queue holds already: which, at most a few.
    #[error("the queue already holds {0}; nothing was imported")]
    Present(String),
}

/// Every task of the store at `path`, oldest first (read-only: a running router may keep
/// writing; what was committed when the read began is what is read).
pub fn export(path: &Path) -> Result<Vec<Moved>, StoreError> {
    read_at(path, |conn| {
        if !has_table(conn)? {
            return Ok(Vec::new());
        }
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS}, request, idem_key, idem_fingerprint FROM tasks ORDER BY seq"
        ))?;
        let rows = stmt.query_map([], |r| {
            let task = row(r)?;
            let request: Vec<u8> = r.get(25)?;
            let idem = match (r.get::<_, Option<String>>(26)?, r.get(27)?) {
                (Some(key), Some(fingerprint)) => Some(Idem { key, fingerprint }),
                _ => None,
            };
            Ok(Moved {
                request: (!request.is_empty() && !task.status.is_finished())
                    .then(|| Bytes::from(request)),
                task,
                idem,
            })
        })?;
        rows.collect()
    })
}

/// Writes `tasks` into the store at `path` in one transaction, refused (nothing written)
/// while a router has the store open or when one of their ids or keys is there already.
pub fn import(path: &Path, tasks: &[Moved]) -> Result<(), Refused> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let _held = crate::store::lock_alone(dir)?;
    let mut conn = schema::open_conn_with(path, schema::Durability::Full)?;
    schema::migrate(&mut conn, path)?;
    let tx = conn.transaction().map_err(sqlite(path))?;
    let present = present(&tx, tasks).map_err(sqlite(path))?;
    if !present.is_empty() {
        return Err(Refused::Present(present));
    }
    for m in tasks {
        let request = m.request.as_deref().unwrap_or_default();
        insert_task(&tx, &m.task, request, m.idem.as_ref()).map_err(sqlite(path))?;
    }
    tx.commit().map_err(sqlite(path))?;
    Ok(())
}

/// The ids and keys of `tasks` the store holds already, said ([`listed`]); '' if none.
fn present(tx: &Transaction<'_>, tasks: &[Moved]) -> rusqlite::Result<String> {
    let mut found = Vec::new();
    let mut by_id = tx.prepare("SELECT 1 FROM tasks WHERE id = ?1")?;
    let mut by_key = tx.prepare("SELECT id FROM tasks WHERE owner = ?1 AND idem_key = ?2")?;
    for m in tasks {
        let t = &m.task;
        if by_id.exists(params![t.id.as_str()])? {
            found.push(format!("task {}", t.id));
        }
        if let Some(idem) = &m.idem {
            let holder: Option<String> = by_key
                .query_row(params![t.owner, idem.key], |r| r.get(0))
                .optional()?;
            if let Some(holder) = holder {
                found.push(format!(
                    "the idempotency key of task {} (on task {})",
                    t.id,
                    crate::text::bounded(&holder)
                ));
            }
        }
    }
    Ok(listed(&found))
}

/// Conflicts said: the first five, and how many more; '' when there are none.
pub fn listed(found: &[String]) -> String {
    const SAID: usize = 5;
    let first = found[..found.len().min(SAID)].join(", ");
    match found.len().saturating_sub(SAID) {
        0 => first,
        more => format!("{first} and {more} more"),
    }
}
