//! `labrouter check --live`: one line per machine and model, a missing model with its
//! suggestion, an unreachable machine reported, each machine asked once.

use labrouter::sim::{Fault, Sim};

use super::{labrouter, ollama, written};

/// The registry of the check --live tests: an Ollama GPU box and an OpenAI CPU box.
fn live_registry(gpu: &Sim, cpu: &Sim) -> String {
    format!(
        "machines:\n  gpu: {{ url: \"{}\", api: ollama }}\n  cpu: {{ url: \"{}\" }}\nmodels:\n  coder: {{ machine: gpu, name: \"qwen3-coder:30b\" }}\n  small: {{ machine: gpu, name: \"qwen3:4b\" }}\n  coder-cpu: {{ machine: cpu, name: \"qwen3-coder:30b\" }}\nroutes:\n  - name: code\n    chain: [coder, coder-cpu, small]\n",
        gpu.base_url(),
        cpu.base_url()
    )
}

#[tokio::test]
async fn check_live_names_a_missing_model_with_its_suggestion_and_exits_1() {
    let gpu = ollama("gpu", &["qwen3-coder:30b-q4_K_M", "qwen3:4b"]).await;
    let cpu = Sim::start("cpu").await.unwrap();
    cpu.set_models(&["qwen3-coder:30b"]);
    let (_dir, path) = written(&live_registry(&gpu, &cpu));
    let ran = labrouter(&["check", "--live", path.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    let lines: Vec<&str> = ran.stdout.lines().skip(1).collect();
    let file = path.display();
    assert_eq!(
        lines,
        [
            "machine gpu: reachable (ollama, 2 models listed)",
            "  model coder (qwen3-coder:30b): missing; did you mean qwen3-coder:30b-q4_K_M?",
            "  model small (qwen3:4b): present",
            "machine cpu: reachable (openai, 1 model listed)",
            "  model coder-cpu (qwen3-coder:30b): present",
            &format!("{file}: live: 2 of 2 machines answered; 1 model missing"),
        ],
        "{ran:?}"
    );
    assert_eq!((gpu.hits("/api/tags"), cpu.hits("/v1/models")), (1, 1));
    assert_eq!(gpu.work_hits() + cpu.work_hits(), 0);
}

#[tokio::test]
async fn check_live_reports_an_unreachable_machine_and_exits_0() {
    let gpu = ollama("gpu", &["qwen3-coder:30b", "qwen3:4b"]).await;
    let cpu = Sim::start("cpu").await.unwrap();
    cpu.set(Fault::Refuse);
    let (_dir, path) = written(&live_registry(&gpu, &cpu));
    let ran = labrouter(&["check", "--live", path.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout
            .contains("machine cpu: unreachable: cannot connect: "),
        "{ran:?}"
    );
    assert!(
        ran.stdout.contains(
            "  model coder-cpu (qwen3-coder:30b): not checked (the machine did not answer)"
        ),
        "{ran:?}"
    );
    assert!(
        ran.stdout
            .contains("live: 1 of 2 machines answered; 0 models missing"),
        "{ran:?}"
    );
}

#[tokio::test]
async fn check_live_with_every_model_present_exits_0() {
    let gpu = ollama("gpu", &["qwen3-coder:30b", "qwen3:4b"]).await;
    let cpu = Sim::start("cpu").await.unwrap();
    cpu.set_models(&["qwen3-coder:30b"]);
    let (_dir, path) = written(&live_registry(&gpu, &cpu));
    let ran = labrouter(&["check", "--live", path.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.stdout.matches(": present").count(), 3, "{ran:?}");
    assert!(
        ran.stdout
            .contains("live: 2 of 2 machines answered; 0 models missing"),
        "{ran:?}"
    );
}

#[tokio::test]
async fn check_live_on_an_invalid_file_asks_no_machine() {
    let gpu = ollama("gpu", &["qwen3:4b"]).await;
    let cpu = Sim::start("cpu").await.unwrap();
    let text = live_registry(&gpu, &cpu).replace("chain: [coder,", "chain: [nope,");
    let (_dir, path) = written(&text);
    let ran = labrouter(&["check", "--live", path.to_str().unwrap()]).await;
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains("unknown model 'nope' in chain"),
        "{ran:?}"
    );
    assert_eq!(gpu.hits("/api/tags") + cpu.hits("/v1/models"), 0);
}
