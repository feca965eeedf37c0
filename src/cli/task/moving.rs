//! `labrouter task export|import FILE` (README "Moving a queue"): the queue the registry's
//! `cluster.tasks` selects, written to a file whole, or a file read whole, checked and
//! written into it. What is said goes to stderr; the exit status says whether it happened.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cluster::tasks::SharedQueue;
use crate::cluster::Endpoint;
use crate::registry::{QueueMode, Registry};
use crate::store::tasks::moving as local;
use crate::tasks::moving::{read, write, Bounds};

/// Each Redis script of a move at least: pages and batches of a hundred tasks, more than
/// a submit's one.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// `task export FILE`.
pub async fn export(file: &Path, config: &Path) -> anyhow::Result<ExitCode> {
    let reg = Registry::load(config)?;
    let from = mode(&reg);
    let tasks = match from {
        QueueMode::Local => {
            let path = store_of(&reg);
            anyhow::ensure!(
                path.exists(),
                "no state store at {}: the router of {} has kept no tasks there",
                path.display(),
                config.display()
            );
            local::export(&path)?
        }
        QueueMode::Shared => shared(&reg).await?.export().await?,
    };
    let from = from.as_str();
    write(file, from, &tasks)?;
    eprintln!(
        "{}: {} tasks exported from the {from} queue",
        file.display(),
        tasks.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `task import FILE`: the whole file checked before anything is written.
pub async fn import(file: &Path, config: &Path) -> anyhow::Result<ExitCode> {
    let reg = Registry::load(config)?;
    let tasks = read(file, Bounds::of(&reg))?;
    let into = mode(&reg);
    match into {
        QueueMode::Local => local::import(&store_of(&reg), &tasks)?,
        QueueMode::Shared => shared(&reg).await?.import(&tasks).await?,
    }
    let into = into.as_str();
    eprintln!(
        "{}: {} tasks imported into the {into} queue",
        file.display(),
        tasks.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn mode(reg: &Registry) -> QueueMode {
    reg.cluster.as_ref().map_or(QueueMode::Local, |c| c.tasks)
}

fn store_of(reg: &Registry) -> std::path::PathBuf {
    reg.server.state_dir.join(crate::store::FILE)
}

/// The pool's queue, as a router reaches it (checked durable), with [`SCRIPT_TIMEOUT`].
async fn shared(reg: &Registry) -> anyhow::Result<SharedQueue> {
    let cluster = reg
        .cluster
        .as_ref()
        .context("cluster.tasks: shared needs the cluster block")?;
    let endpoint = Endpoint::from_env(&cluster.redis_url_env).map_err(anyhow::Error::msg)?;
    let mut config = cluster.clone();
    config.task_timeout = config.task_timeout.max(SCRIPT_TIMEOUT);
    let max_value = crate::cluster::tasks::max_value(reg);
    SharedQueue::connect(&endpoint, &config, max_value)
        .await
        .map_err(anyhow::Error::msg)
}
