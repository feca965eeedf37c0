//! Responses kept for their conversations: each Response labrouter passed (unless the
//! client said `"store": false`), with the input the client sent for that turn and the
//! output items the machine gave, so a `previous_response_id` can be expanded for any
//! machine of the chain, and `GET /v1/responses/{id}` can answer. Keyed by owner (the API
//! key that made it) and the machine's id; pruned after `server.keep_responses`.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

/// A Response larger than this (input, output and the object together) is not kept.
pub const MAX_KEPT: usize = 1 << 20;

/// At most this many earlier turns are expanded into one request.
pub const MAX_TURNS: usize = 1000;

/// One kept Response. The JSON fields are text as they will be sent back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptResponse {
    pub owner: String,
    pub id: String,
    /// The kept Response this one continued, when labrouter expanded it.
    pub previous: Option<String>,
    /// This turn's own input items (a JSON array), before any expansion.
    pub input: String,
    /// The machine's output items (a JSON array).
    pub output: String,
    /// The whole Response object, as `GET /v1/responses/{id}` shows it.
    pub response: String,
    pub created_ms: i64,
}

impl KeptResponse {
    /// Its size as [`MAX_KEPT`] counts it.
    pub fn size(&self) -> usize {
        self.input.len() + self.output.len() + self.response.len()
    }
}

pub(super) fn write(tx: &Transaction<'_>, r: &KeptResponse) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO responses
            (owner, id, previous, input, output, response, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            r.owner,
            r.id,
            r.previous,
            r.input,
            r.output,
            r.response,
            r.created_ms
        ],
    )?;
    Ok(())
}

pub(super) fn forget(tx: &Transaction<'_>, owner: &str, id: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM responses WHERE owner = ?1 AND id = ?2",
        params![owner, id],
    )?;
    Ok(())
}

pub(super) fn prune(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM responses WHERE created_ms < ?1",
        params![before_ms],
    )?;
    Ok(())
}

/// A kept Response of `owner`: the object, and the Response it continued.
pub fn response(
    conn: &Connection,
    owner: &str,
    id: &str,
) -> rusqlite::Result<Option<(String, Option<String>)>> {
    conn.query_row(
        "SELECT response, previous FROM responses WHERE owner = ?1 AND id = ?2",
        params![owner, id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// The conversation that ends with Response `id` of `owner`: each turn's input and output
/// items (JSON arrays), oldest first; empty when labrouter does not keep `id` for `owner`.
/// At most [`MAX_TURNS`] turns and `max_bytes` bytes are read; a longer conversation stops
/// at its newest turns that fit (the client then learns of it as a request too large).
pub fn conversation(
    conn: &Connection,
    owner: &str,
    id: &str,
    max_bytes: usize,
) -> rusqlite::Result<Option<Vec<(String, String)>>> {
    let mut stmt = conn.prepare_cached(
        "SELECT previous, input, output FROM responses WHERE owner = ?1 AND id = ?2",
    )?;
    let mut turns = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let (mut next, mut bytes) = (Some(id.to_string()), 0usize);
    while let Some(at) = next.take() {
        if turns.len() >= MAX_TURNS || !seen.insert(at.clone()) {
            break;
        }
        let row: Option<(Option<String>, String, String)> = stmt
            .query_row(params![owner, at], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let Some((previous, input, output)) = row else {
            break;
        };
        bytes += input.len() + output.len();
        if bytes > max_bytes {
            return Ok(None);
        }
        turns.push((input, output));
        next = previous;
    }
    turns.reverse();
    Ok(Some(turns))
}
