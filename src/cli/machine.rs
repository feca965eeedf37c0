//! `labrouter machine add NAME URL`: ask the machine what it is and what it serves, print
//! it, and add the machine and one model entry per model to registry.yaml by inserting
//! text (`machine/edit.rs`), so every byte already there stays; the result must pass
//! `check` ([`super::check::checked`]) and read back as the entries written, and the file
//! is replaced in one rename (`machine/write.rs`). Any refusal changes nothing: exit 1 and
//! a one-line reason.

use std::path::Path;
use std::process::ExitCode;

use super::ask::{Asker, Found};
use super::check::checked;
use super::MachineCommand;
use crate::outcome::Kind;
use crate::registry::{Api, Registry};

mod edit;
mod names;
mod write;

/// What `machine add` was asked to add.
struct Ask<'a> {
    name: &'a str,
    url: &'a str,
    api: Option<Api>,
    config: &'a Path,
    key_env: Option<&'a str>,
}

/// The entries to write, and what the file must read back as.
struct Plan {
    /// The registry's `url`: the machine's OpenAI base URL, `…/v1`.
    url: String,
    found: Found,
    /// `(entry name, backend name, kind)` for each model found.
    models: Vec<(String, String, Kind)>,
}

/// `labrouter machine ...`.
pub async fn run(command: MachineCommand) -> anyhow::Result<ExitCode> {
    match command {
        MachineCommand::Add {
            name,
            url,
            api,
            config,
            api_key_env,
        } => {
            let ask = Ask {
                name: &name,
                url: &url,
                api: api.map(Api::from),
                config: &config,
                key_env: api_key_env.as_deref(),
            };
            Ok(add(&ask).await)
        }
    }
}

/// Adds the machine, or says in one line why not (exit 1).
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
async fn add(ask: &Ask<'_>) -> ExitCode {
    match added(ask).await {
        Ok((plan, reg, notes)) => {
            for note in notes {
                eprintln!("note: {note}");
            }
            let n = plan.models.len();
            println!(
                "{}: added machine {} and {n} model{} (version {}); put them in a route's chain to route to them by keyword",
                ask.config.display(),
                ask.name,
                if n == 1 { "" } else { "s" },
                reg.version
            );
            ExitCode::SUCCESS
        }
        Err(why) => {
            let why: Vec<&str> = why.lines().map(str::trim).collect();
            eprintln!("{}: not changed: {}", ask.config.display(), why.join(" "));
            ExitCode::FAILURE
        }
    }
}

/// Checks, asks, edits, validates and writes; the plan written, the new registry and what
/// the user should know about it.
async fn added(ask: &Ask<'_>) -> Result<(Plan, Registry, Vec<String>), String> {
    names::machine_name(ask.name)?;
    if let Some(var) = ask.key_env {
        names::env_name(var)?;
    }
    let file = ask.config.display().to_string();
    let text = std::fs::read_to_string(ask.config).map_err(|e| format!("cannot read it: {e}"))?;
    let old = checked(ask.config, Registry::parse(&text, &file))
        .map_err(|e| format!("it does not pass check as it is, fix that first: {e}"))?;
    if old.machine_index(ask.name).is_some() {
        return Err(format!("machine '{}' already exists", ask.name));
    }
    let (root, url) = base_urls(ask.url)?;
    let machines = edit::section(&text, "machines")?;
    let models = edit::section(&text, "models")?;
    let found = asked(ask, &root).await?;
    let plan = plan(&old, ask.name, url, found);
    print_found(ask, &plan);

    let machine = machines.entry(ask.name, &machine_fields(ask, &plan));
    let mut additions = vec![machines.addition(&[machine])];
    if !plan.models.is_empty() {
        let entries: Vec<String> = plan
            .models
            .iter()
            .map(|(entry, backend, kind)| {
                models.entry(entry, &model_fields(ask.name, backend, *kind))
            })
            .collect();
        additions.push(models.addition(&entries));
    }
    let new_text = edit::insert(&text, &additions);
    let new = checked(ask.config, Registry::parse(&new_text, &file))
        .map_err(|e| format!("the result would not pass check: {e}"))?;
    read_back(&old, &new, ask, &plan)?;
    write::replace(ask.config, &text, &new_text)?;
    let notes = now_shared(&old, &plan);
    Ok((plan, new, notes))
}

/// For each backend name that one model had and an added one has too: clients could name
/// the backend name while it was one model's alone (docs/api.md "Routing a request").
fn now_shared(old: &Registry, plan: &Plan) -> Vec<String> {
    let mut notes = Vec::new();
    for (entry, backend, _) in &plan.models {
        let mut had = old.models.iter().filter(|m| m.backend == *backend);
        if let (Some(only), None) = (had.next(), had.next()) {
            notes.push(format!(
                "{backend} named model {} alone; now {entry} has it too, so a request naming {backend} must name one of them (or a route) instead",
                only.name
            ));
        }
    }
    notes
}

/// What the machine at `root` says it is and serves.
async fn asked(ask: &Ask<'_>, root: &str) -> Result<Found, String> {
    if let Some(var) = ask.key_env.filter(|v| std::env::var_os(v).is_none()) {
        eprintln!("note: {var} is not set here, so the machine is asked without a key");
    }
    let asker = Asker::new(ask.key_env)?;
    asker
        .identify(root, ask.api)
        .await
        .map_err(|why| format!("the machine at {root} does not answer as a model server: {why}"))
}

/// The plan for `found` on machine `name` at `url`: an entry name per model, unique in `reg`.
fn plan(reg: &Registry, name: &str, url: String, found: Found) -> Plan {
    let backends: Vec<&str> = found.models.iter().map(|m| m.name.as_str()).collect();
    let taken = |n: &str| {
        n == "auto"
            || reg.models.iter().any(|m| m.name == n)
            || reg.routes.iter().any(|r| r.name == n)
    };
    let entries = names::entry_names(&backends, name, taken);
    let models = entries
        .into_iter()
        .zip(&found.models)
        .map(|(entry, m)| {
            let kind = if m.embed_only {
                Kind::Embed
            } else {
                Kind::Chat
            };
            (entry, m.name.clone(), kind)
        })
        .collect();
    Plan { url, found, models }
}

/// What the machine said, and the entry each model gets.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
fn print_found(ask: &Ask<'_>, plan: &Plan) {
    let what = match (&plan.found.api, &plan.found.version) {
        (Api::Ollama, Some(v)) => format!("Ollama {v} (api: ollama)"),
        (Api::Ollama, None) => "Ollama (api: ollama)".to_owned(),
        (Api::OpenAi, _) => "an OpenAI-compatible server (api: openai)".to_owned(),
    };
    let n = plan.models.len();
    let s = if n == 1 { "" } else { "s" };
    println!("machine {} at {}: {what}, {n} model{s}", ask.name, plan.url);
    for (entry, backend, kind) in &plan.models {
        let kind = match kind {
            Kind::Chat => String::new(),
            other => format!(" (kind: {})", other.as_str()),
        };
        println!("  {backend} -> model {entry}{kind}");
    }
}

/// The machine entry's fields: its URL, `api: ollama` for Ollama, the key's variable.
fn machine_fields(ask: &Ask<'_>, plan: &Plan) -> Vec<(&'static str, String)> {
    let mut fields = vec![("url", edit::scalar(&plan.url))];
    if plan.found.api == Api::Ollama {
        fields.push(("api", "ollama".to_owned()));
    }
    if let Some(var) = ask.key_env {
        fields.push(("api_key_env", var.to_owned()));
    }
    fields
}

/// A model entry's fields: its machine, its backend name, its kind unless chat.
fn model_fields(machine: &str, backend: &str, kind: Kind) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("machine", machine.to_owned()),
        ("name", edit::quoted(backend)),
    ];
    if kind != Kind::Chat {
        fields.push(("kind", kind.as_str().to_owned()));
    }
    fields
}

/// The new registry is the old one with the machine and its models, as planned.
fn read_back(old: &Registry, new: &Registry, ask: &Ask<'_>, plan: &Plan) -> Result<(), String> {
    let wrong = |what: &str| {
        Err(format!(
            "the edited file does not read back as written ({what}); add the machine by hand"
        ))
    };
    let Some(id) = new.machine_index(ask.name) else {
        return wrong("the machine is missing");
    };
    let m = &new.machines[id];
    if m.url != plan.url || m.api != plan.found.api || m.api_key_env.as_deref() != ask.key_env {
        return wrong("the machine's fields differ");
    }
    if new.machines.len() != old.machines.len() + 1
        || new.models.len() != old.models.len() + plan.models.len()
    {
        return wrong("other entries changed");
    }
    for (entry, backend, kind) in &plan.models {
        let ok = new.models.iter().any(|x| {
            x.name == *entry && x.machine == id && x.backend == *backend && x.kind == *kind
        });
        if !ok {
            return wrong(&format!("model {entry}"));
        }
    }
    Ok(())
}

/// The machine's root (where Ollama's `/api/...` lives) and its registry `url` (`root/v1`)
/// from the URL typed: `http://HOST:PORT`, or its OpenAI base URL ending in `/v1`.
fn base_urls(typed: &str) -> Result<(String, String), String> {
    let typed = typed.trim();
    if typed.chars().any(char::is_control) || typed.contains(' ') {
        return Err("the URL holds spaces or control characters".to_owned());
    }
    let parsed = reqwest::Url::parse(typed)
        .map_err(|e| format!("the URL is not one ({e}); expected http://HOST:PORT or its OpenAI base URL, http://HOST:PORT/v1"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("expected an http:// or https:// URL with a host".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("the URL carries a user name or password, which /status would show: put the key in an environment variable and name it with --api-key-env".to_owned());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("expected a base URL, without ?query or #fragment".to_owned());
    }
    let base = typed.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base).to_owned();
    let url = format!("{root}/v1");
    Ok((root, url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_typed_gives_the_root_and_the_v1_base() {
        let both = |r: &str| (r.to_owned(), format!("{r}/v1"));
        assert_eq!(
            base_urls("http://gpu-box2.local:11434"),
            Ok(both("http://gpu-box2.local:11434"))
        );
        assert_eq!(
            base_urls("http://127.0.0.1:8080/v1/"),
            Ok(both("http://127.0.0.1:8080"))
        );
        assert_eq!(
            base_urls(" https://lab.example/llm/v1 "),
            Ok(both("https://lab.example/llm"))
        );
        for (bad, says) in [
            ("gpu-box:11434", "http:// or https://"),
            ("ftp://a/v1", "http:// or https://"),
            ("http://u:secret@a:1/v1", "user name or password"),
            ("http://a:1/v1?key=x", "without ?query"),
            ("http://a:1/\nv1", "control characters"),
            ("not a url", "spaces"),
        ] {
            let err = base_urls(bad).unwrap_err();
            assert!(
                err.contains(says) && !err.contains("secret"),
                "{bad:?}: {err}"
            );
        }
    }
}
