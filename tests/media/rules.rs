//! One test per rule.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use labrouter::registry::Registry;
use labrouter::{RunOptions, Service};
use serde_json::{json, Value};

use crate::fake::{Fake, Mode, SPEECH};

struct Lab {
    gpu: Arc<Fake>,
    cpu: Arc<Fake>,
    base: String,
    client: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Lab {
    async fn start(server: &str) -> Lab {
        let (gpu, cpu) = (
            Fake::start("gpu-box").await,
            Fake::start("ubuntu-box").await,
        );
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
{server}defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
machines:
  gpu-box: {{ url: "{g}" }}
  ubuntu-box: {{ url: "{c}" }}
models:
  coder: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  sdxl-gpu: {{ machine: gpu-box, name: sdxl-turbo, kind: image }}
  sdxl-cpu: {{ machine: ubuntu-box, name: sd-cpu, kind: image }}
  whisper-gpu: {{ machine: gpu-box, name: whisper-large-v3, kind: transcribe }}
  whisper-cpu: {{ machine: ubuntu-box, name: whisper-small, kind: transcribe }}
  tts-gpu: {{ machine: gpu-box, name: kokoro, kind: speech }}
  tts-cpu: {{ machine: ubuntu-box, name: piper, kind: speech }}
  bge-rerank: {{ machine: gpu-box, name: bge-reranker, kind: rerank }}
routes:
  - {{ name: chat, default: true, chain: [coder] }}
  - {{ name: draw, chain: [sdxl-gpu, sdxl-cpu] }}
  - {{ name: listen, chain: [whisper-gpu, whisper-cpu] }}
  - {{ name: speak, chain: [tts-gpu, tts-cpu] }}
  - {{ name: rank, chain: [bge-rerank] }}
"#,
            g = gpu.base,
            c = cpu.base
        );
        let svc = Arc::new(
            Service::in_memory(Registry::parse(&yaml, "media.yaml").unwrap(), None).unwrap(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(labrouter::run(
            svc,
            listener,
            async {
                let _ = stopped.await;
            },
            RunOptions::default(),
        ));
        Lab {
            gpu,
            cpu,
            base,
            client: reqwest::Client::new(),
            _stop: stop,
        }
    }

    async fn post_json(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: reqwest::Body,
    ) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    fn hits(&self) -> (u64, u64) {
        (self.gpu.hits(), self.cpu.hits())
    }
}

const CT: &str = "multipart/form-data; boundary=----labrouter-test";

/// A multipart body of `parts` (name, filename, bytes), in order.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, file, content) in parts {
        let file = file
            .map(|f| format!("; filename=\"{f}\"\r\nContent-Type: application/octet-stream"))
            .unwrap_or_default();
        b.extend_from_slice(format!("------labrouter-test\r\nContent-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n").as_bytes());
        b.extend_from_slice(content);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"------labrouter-test--\r\n");
    b
}

/// An audio file with every byte value, NUL and 0xFF, and things that look like a boundary.
fn audio() -> Vec<u8> {
    let mut a: Vec<u8> = (0..=255u8).cycle().take(64 * 1024).collect();
    a.extend_from_slice(b"\r\n------labrouter-tes\x00\xff");
    a
}

#[tokio::test(start_paused = true)]
async fn an_upload_reaches_each_machine_with_its_model_and_identical_bytes_chunked_or_sized() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::Status(500));
    let file = audio();
    let sent = multipart(&[
        ("file", Some("a.wav"), &file),
        ("language", None, b"en"),
        ("model", None, b"listen"),
    ]);
    for chunked in [false, true] {
        let body = if chunked {
            let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                sent.chunks(4096).map(|c| Ok(c.to_vec())).collect();
            reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
        } else {
            reqwest::Body::from(sent.clone())
        };
        let resp = lab.post_raw("/v1/audio/transcriptions", CT, body).await;
        assert_eq!(resp.status(), 200, "chunked: {chunked}");
        assert_eq!(
            resp.headers()["x-labrouter-target"],
            "whisper-cpu@ubuntu-box"
        );
        let length = resp.headers().get("content-length").cloned();
        let answer = resp.bytes().await.unwrap();
        assert_eq!(
            length.map(|v| v.to_str().unwrap().parse::<usize>().unwrap()),
            Some(answer.len()),
            "the answer's length is relayed, not chunked"
        );
        let v: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(v["text"], "heard by ubuntu-box");
        let expect = |backend: &str| {
            multipart(&[
                ("file", Some("a.wav"), &file),
                ("language", None, b"en"),
                ("model", None, backend.as_bytes()),
            ])
        };
        assert_eq!(
            lab.gpu.last_body().to_vec(),
            expect("whisper-large-v3"),
            "the first machine"
        );
        assert_eq!(
            lab.cpu.last_body().to_vec(),
            expect("whisper-small"),
            "the fallback, the same bytes again"
        );
    }
    assert_eq!(lab.hits(), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn an_upload_without_a_model_part_goes_to_its_kinds_default_route_with_the_part_added() {
    let lab = Lab::start("").await;
    let image = b"\x89PNG\r\n\x1a\n\x00\x00\xff".to_vec();
    let sent = multipart(&[
        ("image", Some("cat.png"), &image),
        ("prompt", None, b"a hat"),
    ]);
    let resp = lab.post_raw("/v1/images/edits", CT, sent.into()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-labrouter-route"], "draw");
    let got = lab.gpu.last_body().to_vec();
    let expect = multipart(&[
        ("image", Some("cat.png"), &image),
        ("prompt", None, b"a hat"),
        ("model", None, b"sdxl-turbo"),
    ]);
    assert_eq!(got, expect);
}

#[tokio::test(start_paused = true)]
async fn bad_uploads_and_wrong_kinds_are_refused_before_any_machine() {
    let lab = Lab::start("  max_upload: 1MiB\n").await;
    let ok = multipart(&[("file", Some("a.wav"), b"RIFF"), ("model", None, b"listen")]);
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "/v1/audio/transcriptions",
            "multipart/form-data",
            ok.clone(),
            400,
            "no boundary",
        ),
        (
            "/v1/audio/transcriptions",
            CT,
            b"------labrouter-test\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nRIFF"
                .to_vec(),
            400,
            "no closing boundary",
        ),
        (
            "/v1/audio/transcriptions",
            CT,
            multipart(&[("file", Some("big.wav"), &vec![7u8; 2 << 20])]),
            413,
            "server.max_upload",
        ),
        (
            "/v1/audio/transcriptions",
            CT,
            multipart(&[("file", Some("a.wav"), b"RIFF"), ("model", None, b"coder")]),
            400,
            "wrong_kind",
        ),
        (
            "/v1/images/edits",
            CT,
            multipart(&[("image", Some("a.png"), b"x"), ("model", None, b"listen")]),
            400,
            "transcribe",
        ),
    ];
    for (path, ct, body, status, says) in cases {
        let resp = lab.post_raw(path, ct, body.into()).await;
        assert_eq!(resp.status(), status, "{path} {says}");
        let text = resp.text().await.unwrap();
        assert!(text.contains(says), "{path}: {text} should say {says}");
    }
    let resp = lab
        .post_json(
            "/v1/images/generations",
            json!({"model": "speak", "prompt": "x"}),
        )
        .await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "wrong_kind");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/images/generations"));
    assert_eq!(lab.hits(), (0, 0), "nothing reached a machine");
}

#[tokio::test(start_paused = true)]
async fn speech_passes_chunk_by_chunk_before_the_machine_has_finished() {
    let lab = Lab::start("").await;
    let resp = lab
        .post_json(
            "/v1/audio/speech",
            json!({"model": "speak", "input": "hi", "voice": "a"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "audio/wav");
    let mut body = resp.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(&first[..], SPEECH[0]);
    assert!(
        !lab.gpu.finished.load(std::sync::atomic::Ordering::SeqCst),
        "the first bytes came first"
    );
    let mut all = first.to_vec();
    while let Some(c) = body.next().await {
        all.extend_from_slice(&c.unwrap());
    }
    assert_eq!(all, SPEECH.concat());
}

#[tokio::test(start_paused = true)]
async fn speech_cut_before_a_byte_is_replaced_and_cut_after_bytes_cuts_the_client_and_counts() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::CutAfter(0));
    let resp = lab
        .post_json("/v1/audio/speech", json!({"model": "speak", "input": "hi"}))
        .await;
    assert_eq!(resp.headers()["x-labrouter-target"], "tts-cpu@ubuntu-box");
    assert_eq!(resp.bytes().await.unwrap().to_vec(), SPEECH.concat());
    lab.gpu.set(Mode::CutAfter(1));
    let resp = lab
        .post_json("/v1/audio/speech", json!({"model": "speak", "input": "hi"}))
        .await;
    assert_eq!(
        resp.headers()["x-labrouter-target"],
        "tts-gpu@ubuntu-box".replace("ubuntu-box", "gpu-box")
    );
    let mut body = resp.bytes_stream();
    assert_eq!(&body.next().await.unwrap().unwrap()[..], SPEECH[0]);
    let rest = body.next().await;
    assert!(
        matches!(rest, Some(Err(_))),
        "the client's body is cut: {rest:?}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let status: Value = lab
        .client
        .get(format!("{}/status", lab.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        status["machines"]["gpu-box"]["consecutive_failures"], 2,
        "both cuts counted: {}",
        status["machines"]["gpu-box"]
    );
    assert_eq!(lab.hits(), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn images_and_rerank_are_judged_by_what_their_answers_hold() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::Hollow);
    let resp = lab
        .post_json("/v1/images/generations", json!({"prompt": "a cat", "n": 1}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["x-labrouter-skipped"],
        "sdxl-gpu@gpu-box=malformed"
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["data"][0]["revised_prompt"], "ubuntu-box");
    assert_eq!(
        lab.gpu.bodies.lock().unwrap()[0].1,
        serde_json::to_vec(&json!({"model": "sdxl-turbo", "n": 1, "prompt": "a cat"})).unwrap()
    );
    lab.gpu.set(Mode::Ok);
    for path in ["/v1/rerank", "/v1/reranking", "/rerank"] {
        let resp = lab
            .post_json(
                path,
                json!({"model": "rank", "query": "q", "documents": ["a", "b"]}),
            )
            .await;
        assert_eq!(resp.status(), 200, "{path}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["results"][0]["index"], 1);
    }
    assert_eq!(lab.hits(), (4, 1));
}

#[tokio::test(start_paused = true)]
async fn uploads_past_max_uploads_in_flight_wait_then_get_busy() {
    let lab = Lab::start("  max_uploads_in_flight: 1\n").await;
    // The first upload's body never finishes arriving: it holds the one slot.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    tx.send(Ok(b"------labrouter-test\r\n".to_vec()))
        .await
        .unwrap();
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let client = lab.client.clone();
    let url = format!("{}/v1/audio/transcriptions", lab.base);
    let holder = tokio::spawn(async move {
        client
            .post(url)
            .header("content-type", CT)
            .body(reqwest::Body::wrap_stream(stream))
            .send()
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = multipart(&[("file", Some("a.wav"), b"RIFF"), ("model", None, b"listen")]);
    let resp = lab
        .post_raw("/v1/audio/transcriptions", CT, second.into())
        .await;
    assert_eq!(resp.status(), 503);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "busy");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("server.max_uploads_in_flight"));
    drop(tx);
    let _ = holder.await;
    assert_eq!(lab.hits(), (0, 0));
}
