//! `labrouter status`: a running router's breakers as a terminal table.

use std::process::ExitCode;

use anyhow::Context;
use serde::Deserialize;
use serde_json::Value;

use super::View;

/// Fetches `{url}/status` and prints it (CLI glue, hence anyhow).
#[allow(clippy::print_stdout)] // the CLI's printing
pub async fn print(url: &str, raw: bool) -> anyhow::Result<ExitCode> {
    let url = format!("{}/status", url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().get(&url);
    if let Ok(key) = std::env::var("LABROUTER_API_KEY") {
        req = req.bearer_auth(key);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = resp.status();
    // The HTTP edge: any JSON first (an error envelope, or `--json` printed as it came).
    let body: Value = resp
        .json()
        .await
        .with_context(|| format!("{url} did not answer JSON"))?;
    if !status.is_success() {
        anyhow::bail!(
            "{url}: HTTP {status}: {}",
            body["error"]["message"].as_str().unwrap_or("")
        );
    }
    if raw {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(ExitCode::SUCCESS);
    }
    let view =
        View::deserialize(&body).with_context(|| format!("{url} did not answer a status"))?;
    print!("{}", table(&view));
    Ok(ExitCode::SUCCESS)
}

/// The table, as text: one row per machine, then the routes, then a tasks line when the
/// router has a task queue.
pub fn table(view: &View) -> String {
    let mut rows = vec![[
        "MACHINE".to_string(),
        "STATE".into(),
        "FAILS".into(),
        "COOLDOWN".into(),
        "ATTEMPTS".into(),
        "REJECTED".into(),
        "LAST REASON".into(),
    ]];
    for (name, m) in &view.machines {
        let left = m.cooldown_left_ms;
        rows.push([
            name.clone(),
            m.state.to_string(),
            m.consecutive_failures.to_string(),
            if left > 0 {
                format!("{}s", left.div_ceil(1000))
            } else {
                "-".into()
            },
            m.remote_attempts.to_string(),
            m.local_rejections.to_string(),
            m.last_reason.as_deref().unwrap_or("-").to_string(),
        ]);
    }
    let mut out = crate::text::columns(&rows);
    out.push('\n');
    for r in &view.routes {
        out.push_str(&format!("route {}: {}\n", r.name, r.chain.join(" -> ")));
    }
    if let Some(t) = &view.tasks {
        out.push('\n');
        out.push_str(&t.line());
        out.push('\n');
    }
    out
}
