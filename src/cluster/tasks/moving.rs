//! The shared queue moved whole (`labrouter task export|import`, README "Moving a queue"):
//! every task read out a page at a time, and a file's tasks written in batches, each one
//! script, after every id and key was found free.
//!
//! An imported task is written as the queue's own scripts would have left it: its
//! interrupted attempts are the lapses the scripts count (so a task interrupted once is
//! failed at its next), a finished one keeps its end (`ended_by` `import`, so its error
//! stands as written), and one that was running is under a lease that has already lapsed:
//! the next claim records the interruption, as when its router died. A follow-up is linked
//! to its parents as a submit links it (`follow`), or cancelled as a parent's end cancels
//! it, and an unfinished task keeps its deadline (`deadlines`).

use redis::Script;

use super::answers::spoiled;
use super::{record, score, scripts::COMMON, QueueError, SharedQueue};
use crate::outcome::{AttemptOutcome, Delivery};
use crate::store::tasks::moving::{listed, Moved};
use crate::store::tasks::Idem;
use crate::task::TaskId;

/// Tasks read per export script.
const PAGE: usize = 100;
/// Tasks written per import script (one fsync each), at most.
const BATCH: usize = 100;
/// Bytes of requests and results per import script, at most (one larger task goes alone).
const BATCH_BYTES: usize = 8 << 20;
/// Ids (and keys) looked at per check script.
const CHECK: usize = 1000;

/// A page of tasks after id `after` ('' = the first), oldest id first, each read whole with
/// its owner, its idempotency key's name and that key's value.
/// KEYS: all. ARGV: task key prefix, after, n, max. Returns `{tasks, last id}` ('' = end).
const EXPORT: &str = r"
local from = ARGV[2] == '' and '-' or ('(' .. ARGV[2])
local ids = redis.call('ZRANGEBYLEX', KEYS[1], from, '+', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local k = ARGV[1] .. id
  local got = fetch(k, id, tonumber(ARGV[4]), true)
  if got and got[1] == '=' then
    if redis.call('HSTRLEN', k, 'owner') > 256 or redis.call('HSTRLEN', k, 'idem') > 400 then
      got = {'!', id, 'its owner or idem field is too long'}
    else
      local h = redis.call('HMGET', k, 'owner', 'idem')
      local idem, val = h[2] or '', ''
      if idem ~= '' and redis.call('TYPE', idem).ok == 'string' and redis.call('STRLEN', idem) <= 200 then
        val = redis.call('GET', idem)
      end
      got[#got + 1] = h[1] or ''
      got[#got + 1] = idem
      got[#got + 1] = val
    end
  end
  if got then out[#out + 1] = got end
end
return {out, #ids < tonumber(ARGV[3]) and '' or ids[#ids]}
";

/// Which of the given ids, and idempotency keys, the queue holds already.
/// ARGV: prefix, then pairs of id and key hash ('' = none). Returns what is there, said.
const PRESENT: &str = r"
local out = {}
for i = 2, #ARGV, 2 do
  local id, ih = ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', ARGV[1] .. 't:' .. id) == 1 then out[#out + 1] = 'task ' .. id end
  if ih ~= '' and redis.call('EXISTS', ARGV[1] .. 'idem:' .. ih) == 1 then
    out[#out + 1] = 'the idempotency key of task ' .. id
  end
end
return out
";

/// Writes a batch of tasks, none if one of their ids or keys is there already, as a submit
/// would have left each (`follow`, `deadlines`, `limits`). An unfinished follow-up is
/// looked at against its parents as they stand in the queue (those earlier in the file
/// written already): all succeeded, it is ready; one ended otherwise (or is not there), it
/// is cancelled as the cascade cancels (`ended_by` `after:{parent}:{status}`); else it is
/// `blocked`, linked (`children:{parent}`) with its `pending` count. An unfinished task
/// joins `deadlines`; one that was running is under a lease that lapsed already, so the
/// next claim gives its place among the running back (`leases`) and queues it again. A
/// finished task whose callback is still to be delivered joins `ended`, whose tasks'
/// callbacks the next router to look sends (as for a task a claim failed).
/// ARGV: prefix, then per task: id, status, score, owner, doc, req, result, lapses,
/// ended_ms ('' = unfinished), key hash ('' = none), fingerprint, deliver ('1' or ''),
/// parent ids (by commas), deadline_ms.
/// Returns `{'written', n}`, `{'present', what}` or `{'!', why}`.
const IMPORT: &str = r"
local base = ARGV[1]
local W = 14
local n = (#ARGV - 1) / W
for i = 0, n - 1 do
  local a = 2 + i * W
  if redis.call('EXISTS', base .. 't:' .. ARGV[a]) == 1 then return {'present', 'task ' .. ARGV[a]} end
  if ARGV[a + 9] ~= '' and redis.call('EXISTS', base .. 'idem:' .. ARGV[a + 9]) == 1 then
    return {'present', 'the idempotency key of task ' .. ARGV[a]}
  end
end
local by = base .. 'open_by'
local by_kind = redis.call('TYPE', by).ok
if by_kind ~= 'hash' and by_kind ~= 'none' then return {'!', 'its owner counts hold a ' .. by_kind .. ', not a hash'} end
local first = redis.pcall('INCRBY', base .. 'seq', n)
if type(first) ~= 'number' then return {'!', 'the task counter holds no whole number'} end
first = first - n
local now = now_ms()
local unfinished = {blocked = true, queued = true, waiting = true, running = true}
local function parents_of(status, list)
  local pending, open_ones = 0, {}
  if not unfinished[status] or list == '' then return status, 0, open_ones, nil end
  for p in string.gmatch(list, '[^,]+') do
    local pk = base .. 't:' .. p
    local st = redis.call('TYPE', pk).ok == 'hash' and (redis.call('HGET', pk, 'status') or '') or 'gone'
    if st ~= 'succeeded' then
      if finals[st] or st == 'gone' then return 'cancelled', 0, {}, 'after:' .. p .. ':' .. st end
      pending = pending + 1
      open_ones[#open_ones + 1] = p
    end
  end
  if pending > 0 then return 'blocked', pending, open_ones, nil end
  if status == 'blocked' then status = 'queued' end
  return status, 0, open_ones, nil
end
for i = 0, n - 1 do
  local a = 2 + i * W
  local id, score, owner = ARGV[a], ARGV[a + 2], ARGV[a + 3]
  local status, pending, open_ones, doomed = parents_of(ARGV[a + 1], ARGV[a + 12])
  local k = base .. 't:' .. id
  redis.call('HSET', k, 'status', status, 'owner', owner, 'doc', ARGV[a + 4], 'req', ARGV[a + 5],
    'result', ARGV[a + 6], 'score', score, 'seq', first + i + 1, 'lease', '', 'lapses', ARGV[a + 7],
    'pending', pending)
  if doomed then
    redis.call('HSET', k, 'req', '', 'ended_ms', now, 'ended_by', doomed)
  elseif ARGV[a + 8] ~= '' then
    redis.call('HSET', k, 'ended_ms', ARGV[a + 8], 'ended_by', 'import')
  end
  redis.call('ZADD', base .. 'all', 0, id)
  if unfinished[status] then
    redis.call('ZADD', base .. 'open', 0, id)
    redis.call('HINCRBY', by, owner, 1)
    redis.call('ZADD', base .. 'deadlines', tonumber(ARGV[a + 13]) or 0, id)
    for _, p in ipairs(open_ones) do redis.call('SADD', base .. 'children:' .. p, id) end
  end
  if status == 'queued' or status == 'waiting' then redis.call('ZADD', base .. 'ready', score, id) end
  if status == 'running' then redis.call('ZADD', base .. 'leases', 0, id) end
  if ARGV[a + 9] ~= '' then
    local ik = base .. 'idem:' .. ARGV[a + 9]
    redis.call('SET', ik, ARGV[a + 10] .. ' ' .. id)
    redis.call('HSET', k, 'idem', ik)
  end
  if ARGV[a + 11] == '1' and finals[status] then redis.call('RPUSH', base .. 'ended', id) end
end
return {'written', tostring(n)}
";

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Tasks or keys the queue holds already; nothing was written.
    #[error("the shared queue already holds {0}; nothing was imported")]
    Present(String),
    /// A batch found a task or key that appeared after the check: the batches before it
    /// stay written.
    #[error("the shared queue took {0} while the import ran; {1} tasks were imported before it, the rest were not")]
    Raced(String, usize),
}

fn script(body: &str) -> Script {
    Script::new(&format!("{COMMON}{body}"))
}

impl SharedQueue {
    /// Every task of the pool's queue, in submit order.
    pub async fn export(&self) -> Result<Vec<Moved>, QueueError> {
        let export = script(EXPORT);
        let mut out = Vec::new();
        let mut after = String::new();
        loop {
            let mut call = export.prepare_invoke();
            call.key(self.key("all"))
                .arg(self.key("t:"))
                .arg(&after)
                .arg(PAGE)
                .arg(self.max_value);
            let (page, last): (Vec<Vec<String>>, String) = self
                .bounded(call.invoke_async(&mut self.conn().await?))
                .await?;
            for one in &page {
                out.push(self.moved(one)?);
            }
            if last.is_empty() {
                break;
            }
            after = last;
        }
        out.sort_by_key(|m| m.task.seq);
        Ok(out)
    }

    /// One task of an export page: the fetch's 11 fields, then owner, key name, key value;
    /// anything else (`!`: a task that cannot be read back) is an error naming the task.
    fn moved(&self, got: &[String]) -> Result<Moved, QueueError> {
        let (fields, owner, name, value) = match got {
            [f @ .., o, n, v] if got.len() == 14 => (f, o, n, v),
            _ => {
                return Err(record::fetched(got).err().map_or_else(
                    || spoiled("(none)", format!("{} fields, not a task", got.len())),
                    QueueError::Spoiled,
                ))
            }
        };
        let fetched = record::fetched(fields)?;
        let mut task = fetched.task;
        task.owner = owner.clone();
        let idem = self.idem_of(&task.id, name, value);
        Ok(Moved {
            request: fetched.request.filter(|_| !task.status.is_finished()),
            task,
            idem,
        })
    }

    /// The key named `name` whose value is `{fingerprint} {id}`, if it still names `id`.
    fn idem_of(&self, id: &TaskId, name: &str, value: &str) -> Option<Idem> {
        let key = name.strip_prefix(&self.key("idem:"))?;
        let (fingerprint, holder) = value.split_once(' ')?;
        (holder == id.as_str()).then(|| Idem {
            key: key.to_string(),
            fingerprint: fingerprint.to_string(),
        })
    }

    /// Writes `tasks` into the pool's queue: refused, nothing written, when one of their
    /// ids or keys is there already; then in batches of [`BATCH`].
    pub async fn import(&self, tasks: &[Moved]) -> Result<(), ImportError> {
        let present = script(PRESENT);
        let mut found = Vec::new();
        for chunk in tasks.chunks(CHECK) {
            let mut call = present.prepare_invoke();
            call.arg(self.key(""));
            for m in chunk {
                call.arg(m.task.id.as_str())
                    .arg(m.idem.as_ref().map_or("", |i| i.key.as_str()));
            }
            let got: Vec<String> = self
                .bounded(call.invoke_async(&mut self.conn().await?))
                .await?;
            found.extend(got);
        }
        if !found.is_empty() {
            return Err(ImportError::Present(listed(&found)));
        }
        let import = script(IMPORT);
        let mut written = 0;
        for chunk in batches(tasks) {
            let mut call = import.prepare_invoke();
            call.arg(self.key(""));
            for m in chunk {
                self.import_args(&mut call, m);
            }
            let (what, said): (String, String) = self
                .bounded(call.invoke_async(&mut self.conn().await?))
                .await?;
            match what.as_str() {
                "written" => written += chunk.len(),
                "present" => return Err(ImportError::Raced(said, written)),
                _ => return Err(QueueError::Unavailable(crate::text::bounded(&said)).into()),
            }
        }
        Ok(())
    }

    /// One task's fourteen arguments of [`IMPORT`].
    fn import_args(&self, call: &mut redis::ScriptInvocation<'_>, m: &Moved) {
        let t = &m.task;
        call.arg(t.id.as_str())
            .arg(t.status.as_str())
            .arg(score(t))
            .arg(&t.owner)
            .arg(record::doc(t))
            .arg(m.request.as_deref().unwrap_or_default())
            .arg(record::result(t))
            .arg(lapses(t))
            .arg(match t.status.is_finished() {
                true => t.finished_ms.unwrap_or(t.created_ms).to_string(),
                false => String::new(),
            })
            .arg(m.idem.as_ref().map_or("", |i| i.key.as_str()))
            .arg(m.idem.as_ref().map_or("", |i| i.fingerprint.as_str()))
            .arg(match &t.callback {
                Some(c) if c.state == Delivery::Pending => "1",
                _ => "",
            })
            .arg(
                t.after
                    .iter()
                    .map(TaskId::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
            )
            .arg(t.deadline_ms);
    }
}

/// `tasks` cut into import batches: [`BATCH`] tasks or [`BATCH_BYTES`] of their requests
/// and results, whichever comes first.
fn batches(tasks: &[Moved]) -> Vec<&[Moved]> {
    let size = |m: &Moved| {
        m.request.as_ref().map_or(0, |r| r.len())
            + m.task.result.as_ref().map_or(0, |r| r.body.get().len())
    };
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, m) in tasks.iter().enumerate() {
        let full = i - start == BATCH || (i > start && bytes + size(m) > BATCH_BYTES);
        if full {
            out.push(&tasks[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size(m);
    }
    if start < tasks.len() {
        out.push(&tasks[start..]);
    }
    out
}

/// The task's interrupted attempts as the scripts keep them: the ms of each, by commas.
fn lapses(t: &crate::task::Task) -> String {
    t.attempts
        .iter()
        .filter(|r| r.outcome == AttemptOutcome::Interrupted)
        .map(|r| {
            r.at.parse::<jiff::Timestamp>()
                .map_or(0, |ts| ts.as_millisecond())
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(",")
}
