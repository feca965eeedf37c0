//! `labrouter task submit|show|list|cancel` (docs/api.md "Tasks") as a user runs them: the real
//! binary as a child process against a whole router served in-process on 127.0.0.1, with
//! simulated machines and a task store in a temporary directory. The wire is the witness:
//! the machines' hit counts say what the tasks sent. Real time, so waits are bounded polls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[allow(dead_code)] // the task tests use more of the lab
#[path = "tasks/lab.rs"]
mod lab;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use lab::Lab;

/// How a `labrouter` run ended.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `labrouter task ARGS`, started now; the environment is scrubbed of the CLI's variables.
fn spawn(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .arg("task")
        .args(args)
        .env_remove("LABROUTER_API_KEY")
        .env_remove("LABROUTER_URL")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the labrouter binary starts")
}

/// Waits (at most 45 s) for a started run to end.
async fn ended(child: tokio::process::Child) -> Ran {
    let out = tokio::time::timeout(Duration::from_secs(45), child.wait_with_output())
        .await
        .expect("labrouter task ended within 45 s")
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `labrouter task ARGS`, run to its end.
async fn task(args: &[&str]) -> Ran {
    ended(spawn(args)).await
}

/// The task id a status line starts with.
fn id_of(line: &str) -> String {
    let id = line.split_whitespace().next().unwrap_or_default();
    assert!(
        id.starts_with("tsk_") && id.len() == 30,
        "no id in {line:?}"
    );
    id.to_string()
}

/// Polls the router (every 20 ms, at most 10 s) until task `id` is in `status`.
async fn until_status(lab: &Lab, id: &str, status: &str) -> Value {
    for _ in 0..500 {
        let t = lab.task(id).await;
        if t["status"] == status {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never became {status}: {}", lab.task(id).await);
}

/// Opens every machine's breaker by hand: the whole lab is out.
async fn outage(lab: &Lab) {
    for m in ["gpu-box", "ubuntu-box", "local"] {
        let r = lab
            .post(
                &format!("/admin/breakers/{m}/open"),
                json!({"why": "test outage"}),
            )
            .await;
        assert_eq!(r.status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_wait_prints_the_answer_and_list_show_cancel_read_the_task() {
    let lab = Lab::start("").await;
    let base = lab.base.as_str();

    let run = task(&["submit", "--wait", "--url", base, "fix this bug"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        run.stdout, "ok from gpu-box\n",
        "the answer alone on stdout"
    );
    let id = id_of(&run.stderr);
    assert!(
        run.stderr
            .contains(&format!("{id}  succeeded: served by coder-gpu@gpu-box\n")),
        "progress on stderr: {run:?}"
    );
    assert_eq!(lab.work(), (1, 0, 0), "one task, one request");

    let list = task(&["list", "--url", base]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", list.stdout);
    for col in [
        "ID",
        "STATUS",
        "ROUTE",
        "ATTEMPTS",
        "CREATED",
        "WAITING FOR / ERROR",
    ] {
        assert!(lines[0].contains(col), "{}", lines[0]);
    }
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], id);
    assert_eq!(row[1], "succeeded");
    assert_eq!(row[3], "0/3");
    assert_eq!(row.last(), Some(&"-"));

    let show = task(&["show", &id, "--url", base]).await;
    assert_eq!(show.code, Some(0), "{show:?}");
    assert!(
        show.stdout
            .starts_with(&format!("task       {id}\nstatus     succeeded\n")),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("attempts   0 of 3 used\n"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout
            .contains("served by  coder-gpu@gpu-box (HTTP 200)\n"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.ends_with("answer:\nok from gpu-box\n"),
        "{}",
        show.stdout
    );

    let raw = task(&["show", &id, "--json", "--url", base]).await;
    assert_eq!(raw.code, Some(0), "{raw:?}");
    let raw: Value = serde_json::from_str(&raw.stdout).unwrap();
    assert_eq!(raw["id"], id.as_str());
    assert_eq!(raw["result"]["target"], "coder-gpu@gpu-box");
    assert_eq!(
        raw["result"]["body"]["choices"][0]["message"]["content"], "ok from gpu-box",
        "the whole task object"
    );
    assert_eq!(
        raw["request"],
        Value::Null,
        "a finished task keeps no request"
    );

    // A finished task cannot be cancelled: the router's words, a failing exit status.
    let cancel = task(&["cancel", &id, "--url", base]).await;
    assert_eq!(cancel.code, Some(1), "{cancel:?}");
    assert_eq!(cancel.stdout, "");
    assert_eq!(
        cancel.stderr,
        format!(
            "labrouter: {id} already finished (succeeded); nothing to cancel (task_finished)\n"
        )
    );

    // Errors are sentences, not debug dumps; a malformed id never reaches the router.
    let unknown = "tsk_0000000000000000000000zzzz";
    let missing = task(&["show", unknown, "--url", base]).await;
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert_eq!(
        missing.stderr,
        format!("labrouter: no task {unknown} (of yours) (task_not_found)\n")
    );
    let bad = task(&["cancel", "tsk_../../admin", "--url", base]).await;
    assert_eq!(bad.code, Some(1), "{bad:?}");
    assert!(bad.stderr.contains("is not a task id"), "{bad:?}");
    let status = task(&["list", "--status", "lost", "--url", base]).await;
    assert_eq!(status.code, Some(1), "{status:?}");
    assert!(
        status
            .stderr
            .starts_with("labrouter: status: unknown task status 'lost'"),
        "{status:?}"
    );
    let gone = task(&["list", "--url", "http://127.0.0.1:1"]).await;
    assert_eq!(gone.code, Some(1), "{gone:?}");
    assert!(
        gone.stderr
            .starts_with("labrouter: cannot reach the router at http://127.0.0.1:1: "),
        "{gone:?}"
    );
    for r in [&cancel, &missing, &bad, &status, &gone] {
        assert!(!r.stderr.contains("{ "), "no debug dump: {}", r.stderr);
    }
    assert_eq!(
        lab.work(),
        (1, 0, 0),
        "reading tasks sends nothing to a machine"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waits_through_an_outage_and_its_cancel_fails_the_follow_ups() {
    let lab = Lab::start("").await;
    let base = lab.base.as_str();
    outage(&lab).await;

    let run = task(&["submit", "--url", base, "fix this bug"]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let parent = id_of(&run.stdout);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);

    let run = task(&[
        "submit",
        "--after",
        &parent,
        "--priority",
        "-5",
        "--json",
        "--url",
        base,
        "review this: {{after.0}}",
    ])
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let child: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(child["status"], "blocked");
    assert_eq!(child["after"], json!([parent]));
    assert_eq!(child["priority"], -5);
    let child = child["id"].as_str().unwrap().to_string();

    // A follow-up whose submitter waits for it: it will not succeed.
    let waiter = spawn(&[
        "submit",
        "--wait",
        "--after",
        &parent,
        "--url",
        base,
        "and then {{after.0}}",
    ]);

    until_status(&lab, &parent, "waiting").await;
    let mut listed = 0;
    for _ in 0..500 {
        let page: Value = lab.get("/v1/tasks").await.json().await.unwrap();
        listed = page["data"].as_array().unwrap().len();
        if listed == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(listed, 3, "the waiting submit's task is there too");
    let list = task(&["list", "--status", "waiting", "--url", base]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    let rows: Vec<&str> = list.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{}", list.stdout);
    assert!(
        rows[0].starts_with(&format!("{parent}  waiting")),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains("held back"),
        "says why it waits: {}",
        rows[0]
    );
    let all = task(&["list", "--url", base]).await;
    let blocked: Vec<Vec<&str>> = all
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| r[1] == "blocked")
        .collect();
    assert_eq!(blocked.len(), 2, "{}", all.stdout);
    for r in blocked {
        assert_eq!(r[2..4], ["-", "0/3"]);
        assert_eq!(r[5..], ["after", parent.as_str()]);
    }

    let show = task(&["show", &parent, "--url", base]).await;
    assert!(
        show.stdout.contains("status     waiting\n"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("\nwaiting    "), "{}", show.stdout);
    assert!(
        show.stdout.contains("attempts   0 of 3 used\n"),
        "{}",
        show.stdout
    );

    let cancel = task(&["cancel", &parent, "--url", base]).await;
    assert_eq!(cancel.code, Some(0), "{cancel:?}");
    assert_eq!(
        cancel.stdout,
        format!("{parent}  cancelled: cancelled by its owner\n")
    );

    let waited = ended(waiter).await;
    assert_eq!(
        waited.code,
        Some(1),
        "a follow-up that did not succeed: {waited:?}"
    );
    assert_eq!(waited.stdout, "", "no answer");
    let last = waited.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("  cancelled: dependency_failed: "),
        "{}",
        waited.stderr
    );

    let show = task(&["show", &child, "--url", base]).await;
    assert!(
        show.stdout.contains("status     cancelled\n"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout.contains("error      dependency_failed: "),
        "{}",
        show.stdout
    );
    assert_eq!(
        lab.work(),
        (0, 0, 0),
        "an open lab sees nothing of any task"
    );
    lab.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_wait_outlasts_an_outage_and_prints_the_answer_when_a_machine_is_back() {
    let lab = Lab::start("").await;
    let base = lab.base.as_str();
    outage(&lab).await;
    let mut waiter = spawn(&[
        "submit",
        "--wait",
        "--route",
        "code",
        "--url",
        base,
        "fix this bug",
    ]);
    let mut progress = BufReader::new(waiter.stderr.take().unwrap()).lines();

    // The CLI says its task waits for the breakers (nothing reached a machine); then the
    // GPU box comes back.
    let mut said = Vec::new();
    while !said
        .last()
        .is_some_and(|l: &String| l.contains("  waiting: "))
    {
        let line = tokio::time::timeout(Duration::from_secs(10), progress.next_line())
            .await
            .expect("a progress line within 10 s")
            .unwrap()
            .unwrap_or_else(|| panic!("the run ended while it should wait: {said:?}"));
        said.push(line);
    }
    let id = id_of(&said[0]);
    assert!(
        said.last()
            .unwrap()
            .starts_with(&format!("{id}  waiting: ")),
        "{said:?}"
    );
    assert_eq!(lab.work(), (0, 0, 0));
    let r = lab
        .post("/admin/breakers/gpu-box/close", json!({"why": "back"}))
        .await;
    assert_eq!(r.status(), 200);
    // Well within the CLI's held `?wait=30s`: a finished task is told at once.
    while let Some(line) = tokio::time::timeout(Duration::from_secs(10), progress.next_line())
        .await
        .expect("progress within 10 s")
        .unwrap()
    {
        said.push(line);
    }
    let run = ended(waiter).await;
    assert_eq!(run.code, Some(0), "{run:?} {said:?}");
    assert_eq!(run.stdout, "ok from gpu-box\n");
    assert_eq!(
        said.last().unwrap(),
        &format!("{id}  succeeded: served by coder-gpu@gpu-box"),
        "{said:?}"
    );
    assert_eq!(
        lab.work(),
        (1, 0, 0),
        "one request, once the machine was back"
    );
    lab.stop().await;
}
