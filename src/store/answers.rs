//! Answers kept for `Idempotency-Key` on completions and embeddings (docs/api.md "Tasks"), in the
//! `idempotent_answers` table: written by the writer thread ([`super::Msg::Answer`]), read on
//! their own read-only connection, pruned with the ledger once a day.
//!
//! Nothing here holds a key or a request body: `owner` and `key` are hashes, `fingerprint`
//! the request body's hash. The rule (what is kept, for how long) is `crate::http::idempotency`'s.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{params, OptionalExtension, Transaction};

use super::schema::open_read_only;
use super::{sqlite, StoreError};

/// How long an answer is replayed (docs/api.md "Tasks"): older rows are ignored, then pruned.
pub const ANSWERS_KEEP: Duration = Duration::from_secs(24 * 3600);

/// One machine's answer as replayed for an `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq)]
pub struct KeptAnswer {
    /// Hex SHA-256 of the API key that sent it ("" without keys): `crate::http::Owner`.
    pub owner: String,
    /// Hex SHA-256 of owner, NUL, Idempotency-Key.
    pub key: String,
    /// Hex SHA-256 of the request it answers.
    pub fingerprint: String,
    pub status: u16,
    pub content_type: Option<String>,
    /// The `x-labrouter-*` headers it was served with, in order.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// When it was served (unix ms).
    pub created_ms: i64,
}

/// Keeps `a`, replacing an older answer under the same owner and key (one that expired).
pub(super) fn write(tx: &Transaction<'_>, a: &KeptAnswer) -> rusqlite::Result<()> {
    // A list of string pairs: serializing cannot fail.
    let headers = serde_json::to_string(&a.headers).unwrap_or_else(|_| "[]".into());
    tx.execute(
        "INSERT INTO idempotent_answers
             (owner, key, fingerprint, status, content_type, headers, body, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (owner, key) DO UPDATE SET
             fingerprint = excluded.fingerprint, status = excluded.status,
             content_type = excluded.content_type, headers = excluded.headers,
             body = excluded.body, created_ms = excluded.created_ms",
        params![
            a.owner,
            a.key,
            a.fingerprint,
            a.status,
            a.content_type,
            headers,
            &a.body[..],
            a.created_ms
        ],
    )?;
    Ok(())
}

/// Deletes answers kept before `before_ms` (see [`super::Store::prune`]).
pub(super) fn prune(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<()> {
    let gone = tx.execute(
        "DELETE FROM idempotent_answers WHERE created_ms < ?1",
        params![before_ms],
    )?;
    if gone > 0 {
        tracing::info!(rows = gone, "idempotent answers older than 24 h pruned");
    }
    Ok(())
}

/// The answer kept under `owner` and `key` at or after `since_ms`; an older one is as good
/// as gone (the prune may not have run yet).
pub fn answer(
    path: &Path,
    owner: &str,
    key: &str,
    since_ms: i64,
) -> Result<Option<KeptAnswer>, StoreError> {
    let conn = open_read_only(path)?;
    conn.query_row(
        "SELECT fingerprint, status, content_type, headers, body, created_ms
         FROM idempotent_answers WHERE owner = ?1 AND key = ?2 AND created_ms >= ?3",
        params![owner, key, since_ms],
        |r| {
            let headers: String = r.get(3)?;
            Ok(KeptAnswer {
                owner: owner.to_string(),
                key: key.to_string(),
                fingerprint: r.get(0)?,
                status: r.get(1)?,
                content_type: r.get(2)?,
                headers: serde_json::from_str(&headers).unwrap_or_default(),
                body: Bytes::from(r.get::<_, Vec<u8>>(4)?),
                created_ms: r.get(5)?,
            })
        },
    )
    .optional()
    .map_err(sqlite(path))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{ms, Msg, Store};

    fn kept(key: &str, created_ms: i64) -> KeptAnswer {
        KeptAnswer {
            owner: "o".into(),
            key: key.into(),
            fingerprint: "f".into(),
            status: 200,
            content_type: Some("application/json".into()),
            headers: vec![("x-labrouter-route".into(), "chat".into())],
            body: Bytes::from_static(b"{\"ok\":true}"),
            created_ms,
        }
    }

    #[test]
    fn an_answer_is_read_back_until_it_expires_and_the_prune_deletes_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(dir.path()).unwrap();
        let now = ms(crate::clock::wall());
        let day = ANSWERS_KEEP.as_millis() as i64;
        let tx = store.sender();
        tx.send(Msg::Answer(Box::new(kept("fresh", now)))).unwrap();
        tx.send(Msg::Answer(Box::new(kept("old", now - day - 1))))
            .unwrap();
        assert!(store.flush(Duration::from_secs(5)));
        let path = store.path();
        assert_eq!(
            answer(path, "o", "fresh", now - day).unwrap(),
            Some(kept("fresh", now))
        );
        assert_eq!(answer(path, "other", "fresh", now - day).unwrap(), None);
        assert_eq!(
            answer(path, "o", "old", now - day).unwrap(),
            None,
            "expired"
        );
        assert!(
            answer(path, "o", "old", 0).unwrap().is_some(),
            "still there"
        );
        // A new answer under an expired key replaces it.
        tx.send(Msg::Answer(Box::new(kept("old", now)))).unwrap();
        store.prune(Duration::from_secs(86_400));
        assert!(store.flush(Duration::from_secs(5)));
        assert_eq!(
            answer(path, "o", "old", now - day).unwrap(),
            Some(kept("old", now))
        );
        tx.send(Msg::Answer(Box::new(kept("gone", now - day - 1))))
            .unwrap();
        store.prune(Duration::from_secs(86_400));
        assert!(store.flush(Duration::from_secs(5)));
        assert_eq!(answer(path, "o", "gone", 0).unwrap(), None, "pruned");
    }
}
