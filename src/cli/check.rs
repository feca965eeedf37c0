//! `labrouter check [--live] [FILE]`: the registry validated as `serve` would take it
//! ([`checked`], which `machine add` applies to the file it would write too), and with
//! `--live` every machine asked what it serves (`check/live.rs`).

use std::path::Path;
use std::process::ExitCode;

use crate::registry::{Registry, RegistryError};

mod live;

/// `labrouter check [--live] FILE`.
pub async fn check(file: &Path, live: bool) -> anyhow::Result<ExitCode> {
    let reg = match checked(file, Registry::load(file)) {
        Ok(reg) => reg,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    print_ok(file, &reg);
    if live {
        return Ok(live::live(file, &reg).await);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `check` accepts: a registry that loaded, and with `cluster:` a Redis URL in the
/// environment (serve would refuse it too). The error is one line, naming the file.
pub fn checked(file: &Path, loaded: Result<Registry, RegistryError>) -> Result<Registry, String> {
    let reg = loaded.map_err(|e| e.to_string())?;
    if let Some(cluster) = &reg.cluster {
        if let Err(e) = crate::cluster::Endpoint::from_env(&cluster.redis_url_env) {
            return Err(format!("{}: cluster: {e}", file.display()));
        }
    }
    Ok(reg)
}

/// `FILE: ok: N machines, M models, K routes (version V)`.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
fn print_ok(file: &Path, reg: &Registry) {
    println!(
        "{}: ok: {} machines, {} models, {} routes (version {})",
        file.display(),
        reg.machines.len(),
        reg.models.len(),
        reg.routes.len(),
        reg.version
    );
}
