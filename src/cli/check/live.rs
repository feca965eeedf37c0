//! `labrouter check --live`: every machine of a valid registry asked at once what it
//! serves (at most 5 s each), and one line per machine and per model the registry names on
//! it: reachable or not (and why), each model present or missing, with the closest name the
//! machine does have. Exit 1 only when a machine that answered lacks a model.

use std::path::Path;
use std::process::ExitCode;

use futures_util::future::join_all;

use crate::cli::ask::{Asker, Listed};
use crate::registry::Registry;

mod suggest;

/// Asks every machine of `reg` (read from `file`) and prints the report.
#[allow(clippy::print_stdout, reason = "the CLI's printing")]
pub(super) async fn live(file: &Path, reg: &Registry) -> ExitCode {
    let asked = reg.machines.iter().map(|m| async move {
        let asker = Asker::new(m.api_key_env.as_deref())?;
        asker.models(m).await
    });
    let answers = join_all(asked).await;
    let report = report(reg, &answers);
    for line in &report.lines {
        println!("{line}");
    }
    println!("{}: live: {}", file.display(), report.summary());
    match report.missing {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// What `check --live` found.
#[derive(Debug, PartialEq)]
struct Report {
    lines: Vec<String>,
    machines: usize,
    reachable: usize,
    /// Models the registry names on a machine that answered without them.
    missing: usize,
}

impl Report {
    /// `2 of 3 machines answered; 1 model missing`.
    fn summary(&self) -> String {
        let plural = |n: usize, word: &str| match n {
            1 => format!("{n} {word}"),
            _ => format!("{n} {word}s"),
        };
        format!(
            "{} of {} answered; {} missing",
            self.reachable,
            plural(self.machines, "machine"),
            plural(self.missing, "model"),
        )
    }
}

/// The report for `answers` (one per machine of `reg`, in its order): a machine's line,
/// then one line per model the registry names on it.
fn report(reg: &Registry, answers: &[Result<Vec<Listed>, String>]) -> Report {
    let mut r = Report {
        lines: Vec::new(),
        machines: reg.machines.len(),
        reachable: 0,
        missing: 0,
    };
    for ((id, machine), answer) in reg.machines.enumerate().zip(answers) {
        let listed: &[Listed] = match answer {
            Ok(listed) => {
                r.reachable += 1;
                let n = listed.len();
                let s = if n == 1 { "" } else { "s" };
                r.lines.push(format!(
                    "machine {}: reachable ({}, {n} model{s} listed)",
                    machine.name,
                    machine.api.as_str()
                ));
                listed
            }
            Err(why) => {
                let why = crate::text::bounded(why);
                r.lines
                    .push(format!("machine {}: unreachable: {why}", machine.name));
                &[]
            }
        };
        for model in reg.models.iter().filter(|m| m.machine == id) {
            let head = format!("  model {} ({}):", model.name, model.backend);
            let verdict = if answer.is_err() {
                "not checked (the machine did not answer)".to_string()
            } else if listed
                .iter()
                .any(|l| suggest::same_model(&model.backend, &l.name))
            {
                "present".to_string()
            } else {
                r.missing += 1;
                let names = listed.iter().map(|l| l.name.as_str());
                match suggest::closest(&model.backend, names) {
                    Some(near) => format!("missing; did you mean {near}?"),
                    None => "missing".to_string(),
                }
            };
            r.lines.push(format!("{head} {verdict}"));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(names: &[&str]) -> Vec<Listed> {
        names
            .iter()
            .map(|n| Listed {
                name: (*n).to_owned(),
                embed_only: false,
            })
            .collect()
    }

    const YAML: &str = r#"
machines:
  gpu: { url: "http://127.0.0.1:9/v1", api: ollama }
  cpu: { url: "http://127.0.0.1:10/v1" }
models:
  coder: { machine: gpu, name: "qwen3-coder:30b" }
  small: { machine: gpu, name: "llama3.2" }
  coder-cpu: { machine: cpu, name: "qwen3-coder:30b" }
routes:
  - name: chat
    chain: [coder, small, coder-cpu]
"#;

    #[test]
    fn each_machine_and_model_gets_a_line_and_a_missing_one_its_suggestion() {
        let reg = Registry::parse(YAML, "r.yaml").unwrap();
        let answers = vec![
            Ok(listed(&["qwen3-coder:30b-q4_K_M", "llama3.2:latest"])),
            Err("cannot connect: Connection refused (os error 111)".to_string()),
        ];
        let r = report(&reg, &answers);
        assert_eq!(
            r.lines,
            [
                "machine gpu: reachable (ollama, 2 models listed)",
                "  model coder (qwen3-coder:30b): missing; did you mean qwen3-coder:30b-q4_K_M?",
                "  model small (llama3.2): present",
                "machine cpu: unreachable: cannot connect: Connection refused (os error 111)",
                "  model coder-cpu (qwen3-coder:30b): not checked (the machine did not answer)",
            ]
        );
        assert_eq!((r.machines, r.reachable, r.missing), (2, 1, 1));
        assert_eq!(r.summary(), "1 of 2 machines answered; 1 model missing");
    }

    #[test]
    fn every_model_present_misses_none() {
        let reg = Registry::parse(YAML, "r.yaml").unwrap();
        let answers = vec![
            Ok(listed(&["qwen3-coder:30b", "llama3.2:latest"])),
            Ok(listed(&["qwen3-coder:30b"])),
        ];
        let r = report(&reg, &answers);
        assert_eq!(r.missing, 0);
        assert_eq!(r.summary(), "2 of 2 machines answered; 0 models missing");
    }
}
