//! `labrouter task export|import` (README "Moving a queue"), the real binary on a real
//! SQLite file and a real durable `redis-server`: tasks keep every field across local →
//! shared → local; a file that is not whole (cut mid-line, cut at a line, a garbage line, an
//! oversize line) is refused naming the line, and the target queue is left as it was; an
//! imported idempotency key answers a resend with the imported task, and the machine sees
//! no request for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use labrouter::outcome::{TaskCode, TaskStatus};
use serde_json::{json, Value};

use crate::moving_file::{file_of, id, line, sample, tasks_in, values};
use crate::pool::durable_redis;
use crate::process::Router;
use crate::redis::RedisServer;
use crate::routers::Lab;

/// How a `labrouter task` run ended: its exit code and what it said on stderr.
pub struct Ran {
    pub ok: bool,
    pub said: String,
}

/// `labrouter task VERB FILE --config CONFIG`, Redis at `redis`.
pub fn task(verb: &str, file: &Path, config: &Path, redis: &str) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(["task", verb])
        .arg(file)
        .arg("--config")
        .arg(config)
        .env("LABROUTER_REDIS_URL", redis)
        .env_remove("LABROUTER_CONFIG")
        .output()
        .expect("the labrouter binary runs");
    Ran {
        ok: out.status.success(),
        said: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A registry with its queue `local` (state under `dir/NAME-state`) or `shared` (prefix
/// `lab`, as [`crate::pool::router`]'s).
fn registry(dir: &Path, name: &str, queue: &str) -> PathBuf {
    let state = dir.join(format!("{name}-state"));
    let cluster = match queue {
        "shared" => "cluster:\n  redis_url_env: LABROUTER_REDIS_URL\n  prefix: lab\n  node: mover\n  tasks: shared\n",
        _ => "",
    };
    let text = format!(
        r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
  max_upstream_body: 1MiB
{cluster}machines:
  box: {{ url: "http://127.0.0.1:9" }}
models:
  m: {{ machine: box, name: model }}
routes:
  - {{ name: main, default: true, chain: [m] }}
"#,
        state = state.display()
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Every key of the Redis with what it holds (hash fields and sorted-set members sorted):
/// what a refused import must leave as it was.
async fn redis_keys(redis: &RedisServer) -> BTreeMap<String, String> {
    use crate::redis::Reply;
    let mut c = redis.client().await;
    let texts = |r: Reply| -> Vec<String> {
        match r {
            Reply::Arr(items) => items.iter().map(|i| format!("{i:?}")).collect(),
            other => vec![format!("{other:?}")],
        }
    };
    let mut out = BTreeMap::new();
    let Reply::Arr(keys) = c.cmd(&["KEYS", "*"]).await else {
        panic!("KEYS answers an array")
    };
    for key in keys {
        let key = key.text().unwrap().to_string();
        let kind = format!("{:?}", c.cmd(&["TYPE", &key]).await);
        let mut held = match kind.as_str() {
            k if k.contains("hash") => texts(c.cmd(&["HGETALL", &key]).await),
            k if k.contains("zset") => {
                texts(c.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]).await)
            }
            k if k.contains("list") => texts(c.cmd(&["LRANGE", &key, "0", "-1"]).await),
            _ => texts(c.cmd(&["GET", &key]).await),
        };
        if !kind.contains("list") {
            held.sort();
        }
        out.insert(key, format!("{kind} {held:?}"));
    }
    out
}

#[tokio::test]
async fn every_field_survives_local_to_shared_and_back() {
    let redis = durable_redis().await;
    let dir = tempfile::tempdir().unwrap();
    let (local, shared, back) = (
        registry(dir.path(), "local", "local"),
        registry(dir.path(), "shared", "shared"),
        registry(dir.path(), "back", "local"),
    );
    let url = redis.url();
    let f = |name: &str| dir.path().join(name);
    std::fs::write(f("seed.jsonl"), file_of(&sample())).unwrap();

    let r = task("import", &f("seed.jsonl"), &local, &url);
    assert!(r.ok, "{}", r.said);
    assert!(
        r.said.contains("8 tasks imported into the local queue"),
        "{}",
        r.said
    );
    let r = task("export", &f("a.jsonl"), &local, &url);
    assert!(r.ok, "{}", r.said);
    let (header, a) = tasks_in(&f("a.jsonl"));
    assert_eq!(header["from"], "local");
    assert_eq!(header["count"], 8);
    assert_eq!(values(&a), sample(), "the local queue keeps every field");
    assert!(!f("a.jsonl.tmp").exists(), "written beside, then renamed");

    let r = task("import", &f("a.jsonl"), &shared, &url);
    assert!(r.ok, "{}", r.said);
    let r = task("export", &f("b.jsonl"), &shared, &url);
    assert!(r.ok, "{}", r.said);
    let (header, b) = tasks_in(&f("b.jsonl"));
    assert_eq!(header["from"], "shared");
    assert_eq!(b, a, "the shared queue keeps every field, in submit order");

    // The task that was running is taken as its router's death leaves it: the next claim
    // records the interruption, its second, so it fails; the claim takes the next task.
    let q = crate::pool::router(&url, Duration::from_secs(30)).await;
    let claimed = q.claim().await.unwrap().expect("a task is due");
    assert_eq!(
        claimed.task.id.as_str(),
        id(6),
        "priority 3, the highest due"
    );
    let ran = q.get(&id(8).parse().unwrap()).await.unwrap().unwrap().task;
    assert_eq!((ran.status, ran.interrupted), (TaskStatus::Failed, 2));
    assert_eq!(ran.error.unwrap().code, TaskCode::Interrupted);
    assert_eq!(q.take_ended(10).await.unwrap(), vec![ran.id]);

    let r = task("import", &f("b.jsonl"), &back, &url);
    assert!(r.ok, "{}", r.said);
    let r = task("export", &f("c.jsonl"), &back, &url);
    assert!(r.ok, "{}", r.said);
    assert_eq!(tasks_in(&f("c.jsonl")).1, b, "and back to a local queue");

    // Ids already there: refused, naming them, nothing written.
    let before = redis_keys(&redis).await;
    let r = task("import", &f("a.jsonl"), &shared, &url);
    assert!(!r.ok);
    assert!(r.said.contains(&format!("task {}", id(1))), "{}", r.said);
    assert!(
        r.said.contains("and 5 more") && r.said.contains("nothing was imported"),
        "{}",
        r.said
    );
    assert_eq!(redis_keys(&redis).await, before);
    let r = task("import", &f("a.jsonl"), &back, &url);
    assert!(
        !r.ok && r.said.contains("nothing was imported"),
        "{}",
        r.said
    );
    // In the local queue too: the router that next starts on the store records the
    // interruption, the task's second, and fails it.
    let router = Router::start(&back).await;
    let client = reqwest::Client::new();
    let t = crate::process::finished(&client, &router.base, &id(8)).await;
    assert_eq!(
        (&t["status"], &t["error"]["code"]),
        (&json!("failed"), &json!("interrupted")),
        "{t}"
    );
    let interrupted = t["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["outcome"] == "interrupted");
    assert_eq!(interrupted.count(), 2, "{t}");
}

/// Refused with `expect` in what it says; the local and the shared queue unchanged.
async fn refused(dir: &Path, redis: &RedisServer, name: &str, text: &[u8], expect: &str) {
    let (local, shared) = (
        registry(dir, "local", "local"),
        registry(dir, "shared", "shared"),
    );
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let keys = redis_keys(redis).await;
    let exported = dir.join("before.jsonl");
    assert!(task("export", &exported, &local, &redis.url()).ok);
    for config in [&local, &shared] {
        let r = task("import", &file, config, &redis.url());
        assert!(!r.ok, "{name}: refused");
        assert!(r.said.contains(expect), "{name}: {}", r.said);
    }
    assert_eq!(redis_keys(redis).await, keys, "{name}: Redis unchanged");
    let after = dir.join("after.jsonl");
    assert!(task("export", &after, &local, &redis.url()).ok);
    assert_eq!(
        tasks_in(&after).1,
        tasks_in(&exported).1,
        "{name}: SQLite unchanged"
    );
}

#[tokio::test]
async fn a_file_that_is_not_whole_is_refused_naming_the_line_and_nothing_changes() {
    let redis = durable_redis().await;
    let dir = tempfile::tempdir().unwrap();
    let local = registry(dir.path(), "local", "local");
    // Something in both queues already, to see it stay as it is.
    let seed = dir.path().join("seed.jsonl");
    std::fs::write(&seed, file_of(&sample()[..2])).unwrap();
    assert!(task("import", &seed, &local, &redis.url()).ok);
    let shared = registry(dir.path(), "shared", "shared");
    assert!(task("import", &seed, &shared, &redis.url()).ok);

    let whole = file_of(&sample()[2..]);
    let lines: Vec<&str> = whole.lines().collect();
    let cut_mid = &whole.as_bytes()
        [..whole.len() - lines[lines.len() - 2].len() / 2 - lines[lines.len() - 1].len() - 1];
    refused(
        dir.path(),
        &redis,
        "mid.jsonl",
        cut_mid,
        "line 7: it is cut short",
    )
    .await;
    // Cut at a line boundary: every line whole, only the count (no trailer) shows it.
    let cut_line: String = lines[..5].iter().map(|l| format!("{l}\n")).collect();
    refused(
        dir.path(),
        &redis,
        "boundary.jsonl",
        cut_line.as_bytes(),
        "line 5: the file ends without its trailer: it was cut short (the header says 6 tasks; 4 were read)",
    )
    .await;
    // A trailer whose count disagrees.
    let mut short = lines.clone();
    short.remove(3);
    let short: String = short.iter().map(|l| format!("{l}\n")).collect();
    refused(
        dir.path(),
        &redis,
        "count.jsonl",
        short.as_bytes(),
        "line 7: the header says 6 tasks, the trailer 6, and the file holds 5",
    )
    .await;
    // A garbage line, and a task with a wrong value.
    let mut bad = lines.clone();
    bad[3] = "{\"id\": oops";
    let bad: String = bad.iter().map(|l| format!("{l}\n")).collect();
    refused(
        dir.path(),
        &redis,
        "garbage.jsonl",
        bad.as_bytes(),
        "line 4: not a task",
    )
    .await;
    let mut wrong = sample()[2..].to_vec();
    wrong[1]["priority"] = json!(500);
    refused(
        dir.path(),
        &redis,
        "value.jsonl",
        file_of(&wrong).as_bytes(),
        "line 3: priority 500 is outside -100..100",
    )
    .await;
    // A task twice, and an idempotency key twice.
    let mut twice = sample()[2..].to_vec();
    twice[2] = twice[1].clone();
    let said = format!("line 4: task {} is on line 3 too", id(4));
    refused(
        dir.path(),
        &redis,
        "twice.jsonl",
        file_of(&twice).as_bytes(),
        &said,
    )
    .await;
    let mut keys = sample()[2..].to_vec();
    keys[3]["idempotency"] = keys[2]["idempotency"].clone();
    let said = "line 5: its idempotency key is the one on line 4 too";
    refused(
        dir.path(),
        &redis,
        "keys.jsonl",
        file_of(&keys).as_bytes(),
        said,
    )
    .await;
    // An oversize line: more than a request, a result (max_upstream_body 1MiB) and a MiB.
    let mut big = sample()[2..].to_vec();
    big[2]["metadata"]["blob"] = json!("x".repeat(4 << 20));
    refused(
        dir.path(),
        &redis,
        "big.jsonl",
        file_of(&big).as_bytes(),
        "line 4: 4195038 bytes, more than a task's line may hold",
    )
    .await;
}

#[tokio::test]
async fn an_imported_idempotency_key_answers_a_resend_with_the_imported_task() {
    let mut lab = Lab::start("30s", 1).await;
    // A local router first: one keyed task, served.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.yaml");
    let text = lab.registry("old", &dir.path().join("old-state"));
    std::fs::write(&local, text.replace("tasks: shared", "tasks: local")).unwrap();
    let env = [("LABROUTER_REDIS_URL", lab.redis.url())];
    lab.routers.push(Router::start_with(&local, &env).await);
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, file_of(&[])).unwrap();
    let ran = task("import", &empty, &local, &lab.redis.url());
    assert!(!ran.ok, "refused while the router runs");
    assert!(
        ran.said.contains("a router has the state store") && ran.said.contains("stop it first"),
        "{}",
        ran.said
    );
    let resp = lab.submit(0, 1, Some("nightly-1")).await;
    assert_eq!(resp.status(), 202);
    let first: Value = resp.json().await.unwrap();
    let id = first["id"].as_str().unwrap().to_string();
    lab.until("the task succeeded", Duration::from_secs(20), async || {
        lab.get(0, &format!("/v1/tasks/{id}")).await.1["status"] == "succeeded"
    })
    .await;
    let done = lab.get(0, &format!("/v1/tasks/{id}")).await.1;
    let mut r = lab.routers.pop().unwrap();
    r.terminate(Duration::from_secs(10)).await;
    let served = lab.sim.work_hits();
    assert_eq!(served, 1, "the task was served once");

    let file = dir.path().join("moved.jsonl");
    let ran = task("export", &file, &local, &lab.redis.url());
    assert!(ran.ok, "{}", ran.said);
    let shared = dir.path().join("shared.yaml");
    std::fs::write(&shared, &text).unwrap();
    let ran = task("import", &file, &shared, &lab.redis.url());
    assert!(ran.ok, "{}", ran.said);

    let new = lab.add_router("new").await;
    let resp = lab.submit(new, 1, Some("nightly-1")).await;
    assert_eq!(resp.status(), 200, "a replay");
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    let again: Value = resp.json().await.unwrap();
    assert_eq!(again["id"], first["id"], "the imported task");
    assert_eq!(again["status"], "succeeded");
    assert_eq!(again["result"], done["result"]);
    assert!(done["result"].is_object(), "{done}");
    assert_eq!(
        lab.sim.work_hits(),
        served,
        "no request reached the machine for the resend"
    );
}

#[tokio::test]
async fn a_queue_of_hundreds_moves_in_pages_and_batches_in_submit_order() {
    let redis = durable_redis().await;
    let dir = tempfile::tempdir().unwrap();
    let shared = registry(dir.path(), "shared", "shared");
    let tasks: Vec<Value> = (1..=250)
        .map(|n| {
            let mut t = line(n, "queued");
            t["created_ms"] = json!(1_796_000_000_000_i64 + i64::from(251 - n));
            t["id"] = json!(id(1000 - n));
            t["priority"] = json!(0);
            t
        })
        .collect();
    let file = dir.path().join("many.jsonl");
    std::fs::write(&file, file_of(&tasks)).unwrap();
    let r = task("import", &file, &shared, &redis.url());
    assert!(r.ok, "{}", r.said);
    let out = dir.path().join("out.jsonl");
    assert!(task("export", &out, &shared, &redis.url()).ok);
    // In the order they were imported (submit order), not their ids' or ages' order.
    assert_eq!(values(&tasks_in(&out).1), tasks);
    let local = registry(dir.path(), "local", "local");
    assert!(task("import", &out, &local, &redis.url()).ok);
    let back = dir.path().join("back.jsonl");
    assert!(task("export", &back, &local, &redis.url()).ok);
    assert_eq!(values(&tasks_in(&back).1), tasks);
}
