//! `labrouter task submit|show|list|cancel` (docs/api.md "Tasks"): drive a running router's task queue
//! from a shell; `export|import` move a queue whole (`task/moving.rs`). The calls are in `task/client.rs`, what is printed in `task/view.rs`; this
//! file decides what goes where (stdout: what was asked for; stderr: progress) and the exit
//! status. CLI glue, so errors are `anyhow`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use super::TaskCommand;
use crate::outcome::TaskStatus;
use crate::tasks::TaskId;

pub mod client;
mod moving;
pub mod view;

pub use client::{CallError, Client, Fetched, NewTask};
pub use view::{Page, TaskView};

/// How long each `?wait=` of `submit --wait` holds the answer: the first one briefly, so
/// a task that waits for a breaker says so at once; then half a minute at a time.
const FIRST_WAIT: (&str, Duration) = ("1s", Duration::from_secs(1));
const WAIT_STEP: (&str, Duration) = ("30s", Duration::from_secs(30));

/// How long `submit --wait` keeps asking a router that does not answer (a restart).
const UNREACHABLE_FOR: Duration = Duration::from_secs(60);

/// Runs one `labrouter task` command against the router at `url` (export and import: on
/// the registry's queue itself).
pub async fn run(url: &str, command: TaskCommand) -> anyhow::Result<ExitCode> {
    let client = Client::from_env(url);
    match command {
        TaskCommand::Export { file, config } => moving::export(&file, &config).await,
        TaskCommand::Import { file, config } => moving::import(&file, &config).await,
        TaskCommand::Submit {
            text,
            route,
            after,
            priority,
            deadline,
            model,
            idempotency_key,
            wait,
            json,
        } => {
            let mut task = NewTask::chat(&model, &text);
            task.route = route;
            task.after = after
                .iter()
                .map(|a| checked_id(a).with_context(|| "--after"))
                .collect::<anyhow::Result<_>>()?;
            task.priority = priority;
            task.deadline = deadline;
            submit(&client, &task, idempotency_key.as_deref(), wait, json).await
        }
        TaskCommand::Show { id, wait, json } => {
            let id = checked_id(&id)?;
            // The router bounds the wait and says so; the client only needs to outlast it.
            let held = wait
                .as_deref()
                .map(|w| (w, crate::registry::parse_duration(w).unwrap_or_default()));
            let t = client.show(&id, held).await?;
            emit(&t, json, view::summary(&t.view))?;
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::List {
            status,
            limit,
            before,
            json,
        } => {
            let page = client.list(status.as_deref(), limit, before).await?;
            emit(&page, json, view::table(&page.view.data))?;
            if let (false, Some(b)) = (json, page.view.next_before) {
                eprintln!("(more: labrouter task list --before {b})");
            }
            Ok(ExitCode::SUCCESS)
        }
        TaskCommand::Cancel { id, json } => {
            let id = checked_id(&id)?;
            let t = client.cancel(&id).await?;
            emit(&t, json, format!("{}\n", view::status_line(&t.view)))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A task id as the user typed it, checked before it becomes part of a URL path.
fn checked_id(id: &str) -> anyhow::Result<String> {
    let id: TaskId = id.trim().parse().map_err(anyhow::Error::msg)?;
    Ok(id.to_string())
}

/// Prints the raw JSON (`--json`) or the human `text` on stdout.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
fn emit<T>(fetched: &Fetched<T>, json: bool, text: String) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&fetched.raw)?);
    } else {
        print!("{text}");
    }
    Ok(())
}

/// `task submit`: without `--wait`, the id and status on stdout; with it, progress on
/// stderr and the answer on stdout, exit status 1 unless the task succeeded.
async fn submit(
    client: &Client,
    task: &NewTask,
    idempotency_key: Option<&str>,
    wait: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let submitted = client.submit(task, idempotency_key).await?;
    if submitted.replayed {
        eprintln!(
            "{}: this Idempotency-Key was used before; that task is shown",
            submitted.view.id
        );
    }
    if !wait {
        emit(
            &submitted,
            json,
            format!("{}\n", view::status_line(&submitted.view)),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("{}", view::status_line(&submitted.view));
    let done = wait_until_finished(client, submitted).await?;
    let t = &done.view;
    let answer = match (&t.result, t.status) {
        (Some(r), TaskStatus::Succeeded) => Some(view::result_text(r)),
        _ => None,
    };
    match (answer, json) {
        (_, true) => emit(&done, true, String::new())?,
        (Some(text), false) => emit(&done, false, format!("{}\n", text.trim_end()))?,
        (None, false) => {}
    }
    // Its last status line (on stderr) already said why it did not succeed.
    Ok(match t.status {
        TaskStatus::Succeeded => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// Asks `GET /v1/tasks/{id}?wait=30s` (the first time `1s`) until the task finished, saying each change on
/// stderr (the last one says how it ended). A router that stops answering (a restart: tasks survive it) is asked again for
/// up to [`UNREACHABLE_FOR`].
async fn wait_until_finished(
    client: &Client,
    first: Fetched<TaskView>,
) -> anyhow::Result<Fetched<TaskView>> {
    let id = first.view.id.clone();
    let mut said = view::status_line(&first.view);
    let mut current = first;
    let mut lost = Duration::ZERO;
    let mut step = FIRST_WAIT;
    while !current.view.status.is_finished() {
        match client.show(&id, Some(step)).await {
            Ok(t) => {
                lost = Duration::ZERO;
                step = WAIT_STEP;
                let line = view::status_line(&t.view);
                if line != said {
                    eprintln!("{line}");
                }
                said = line;
                current = t;
            }
            Err(e) if e.is_transient() && lost < UNREACHABLE_FOR => {
                if lost.is_zero() {
                    eprintln!("labrouter: {:#}; asking again", anyhow::Error::new(e));
                }
                let pause = Duration::from_secs(2);
                tokio::time::sleep(pause).await;
                lost += pause;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(current)
}
