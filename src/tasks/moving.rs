//! The export file of `labrouter task export|import` (README "Moving a queue"): JSON lines,
//! a header first (format, version, where the tasks came from, how many), one task per line
//! ([`line`]), a trailer last with the count again, so a file cut anywhere is found out.
//! Written beside its name and renamed, so FILE is whole or absent; read whole and checked,
//! every line, before anything is written anywhere.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::registry::Registry;
use crate::store::tasks::moving::Moved;

mod line;

use line::Line;

/// The format's name, in the header and the trailer.
pub const FORMAT: &str = "labrouter-tasks";
/// The format's version: an importer refuses any other.
pub const VERSION: u32 = 1;
/// A file larger than this is refused before it is read.
const FILE_MAX: u64 = 4 << 30;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    /// `local` or `shared`: the queue it was exported from.
    from: String,
    count: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    end: String,
    count: u64,
}

/// What a file may hold at most, from the registry that imports it.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Bytes of one line.
    pub line: usize,
    /// Tasks.
    pub tasks: u64,
}

impl Bounds {
    /// A request (`tasks.max_request_body`) or a result (`server.max_upstream_body`) and a
    /// MiB for the rest; as many tasks as the queue keeps (`tasks.max_queued` unfinished
    /// and `tasks.max_finished` finished).
    pub fn of(reg: &Registry) -> Bounds {
        Bounds {
            line: reg.tasks.max_request_body + reg.server.max_upstream_body + (1 << 20),
            tasks: u64::from(reg.tasks.max_queued) + reg.tasks.max_finished,
        }
    }
}

/// Why a file was refused: where (a line, when one is to blame) and what.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {why}", .line.map_or(String::new(), |n| format!(" line {n}")))]
pub struct FileError {
    pub file: String,
    pub line: Option<usize>,
    pub why: String,
}

/// Writes `tasks` (from the `from` queue) to `path`: to `path.tmp` first, synced, then
/// renamed, so `path` never holds half a file.
pub fn write(path: &Path, from: &str, tasks: &[Moved]) -> Result<(), FileError> {
    let fail = |why: String| FileError {
        file: path.display().to_string(),
        line: None,
        why,
    };
    let tmp = tmp_of(path);
    let written = write_to(&tmp, from, tasks);
    if let Err(why) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(why));
    }
    std::fs::rename(&tmp, path).map_err(|e| fail(format!("cannot rename {}: {e}", tmp.display())))
}

fn tmp_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn write_to(tmp: &Path, from: &str, tasks: &[Moved]) -> Result<(), String> {
    let file =
        std::fs::File::create(tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let count = tasks.len() as u64;
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        from: from.into(),
        count,
    };
    let io = |e: std::io::Error| format!("cannot write {}: {e}", tmp.display());
    let json = |e: serde_json::Error| e.to_string();
    serde_json::to_writer(&mut out, &header).map_err(json)?;
    out.write_all(b"\n").map_err(io)?;
    for m in tasks {
        serde_json::to_writer(&mut out, &Line::of(m)?).map_err(json)?;
        out.write_all(b"\n").map_err(io)?;
    }
    let trailer = Trailer {
        end: FORMAT.into(),
        count,
    };
    serde_json::to_writer(&mut out, &trailer).map_err(json)?;
    out.write_all(b"\n").map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

/// Reads the whole file at `path` and checks every line: the header, each task (within
/// `bounds`, each id once), the trailer, and that the counts agree. Any problem is an
/// error naming the line; nothing is returned from a file that is not whole.
pub fn read(path: &Path, bounds: Bounds) -> Result<Vec<Moved>, FileError> {
    let fail = |line: Option<usize>, why: String| FileError {
        file: path.display().to_string(),
        line,
        why,
    };
    let bytes = read_whole(path).map_err(|why| fail(None, why))?;
    let Some(body) = bytes.strip_suffix(b"\n") else {
        let n = bytes.split(|&b| b == b'\n').count();
        let why = match bytes.is_empty() {
            true => "the file is empty: an export has a header and a trailer".into(),
            false => "it is cut short (the file does not end with a whole line)".into(),
        };
        return Err(fail((!bytes.is_empty()).then_some(n), why));
    };
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    if lines.len() as u64 > bounds.tasks.saturating_add(2) {
        return Err(fail(
            None,
            format!(
                "{} lines, more than the {} tasks this queue keeps (tasks.max_queued + tasks.max_finished)",
                lines.len(),
                bounds.tasks
            ),
        ));
    }
    for (i, l) in lines.iter().enumerate() {
        if l.len() > bounds.line {
            return Err(fail(
                Some(i + 1),
                format!(
                    "{} bytes, more than a task's line may hold ({} bytes: tasks.max_request_body + server.max_upstream_body + 1MiB)",
                    l.len(),
                    bounds.line
                ),
            ));
        }
    }
    let header: Header =
        parse(lines[0]).map_err(|e| fail(Some(1), format!("not an export header: {e}")))?;
    if header.format != FORMAT || header.version != VERSION {
        return Err(fail(
            Some(1),
            format!(
                "format '{}' version {}, not '{FORMAT}' version {VERSION}",
                crate::text::bounded(&header.format),
                header.version
            ),
        ));
    }
    tasks_of(&lines, header.count).map_err(|(n, why)| fail(Some(n), why))
}

/// The tasks of `lines` (header first): each checked, each id once, the trailer last with
/// `count`, the header's count; the error is a line number and what is wrong there.
fn tasks_of(lines: &[&[u8]], count: u64) -> Result<Vec<Moved>, (usize, String)> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (i, l) in lines.iter().enumerate().skip(1) {
        let n = i + 1;
        if let Ok(t) = parse::<Trailer>(l) {
            if t.end != FORMAT {
                return Err((
                    n,
                    format!(
                        "a trailer of '{}', not '{FORMAT}'",
                        crate::text::bounded(&t.end)
                    ),
                ));
            }
            if n != lines.len() {
                return Err((n, "the trailer is not the last line".into()));
            }
            if t.count != count || out.len() as u64 != count {
                return Err((
                    n,
                    format!(
                        "the header says {count} tasks, the trailer {}, and the file holds {}",
                        t.count,
                        out.len()
                    ),
                ));
            }
            return Ok(out);
        }
        let line: Line = parse(l).map_err(|e| (n, format!("not a task: {e}")))?;
        let m = line.moved().map_err(|why| (n, why))?;
        if let Some(first) = seen.insert(m.task.id.to_string(), n) {
            return Err((n, format!("task {} is on line {first} too", m.task.id)));
        }
        if let Some(first) = m.idem.as_ref().and_then(|i| seen.insert(i.key.clone(), n)) {
            return Err((
                n,
                format!("its idempotency key is the one on line {first} too"),
            ));
        }
        out.push(m);
    }
    Err((
        lines.len(),
        format!(
            "the file ends without its trailer: it was cut short (the header says {count} tasks; {} were read)",
            out.len()
        ),
    ))
}

fn parse<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Result<T, String> {
    let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8 ({e})"))?;
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The file's bytes, whole, refused over [`FILE_MAX`].
fn read_whole(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    file.take(FILE_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > FILE_MAX {
        return Err(format!("larger than {FILE_MAX} bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
