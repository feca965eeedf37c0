//! Images, audio and rerank as a client sees them: a valid PNG, transcripts in every
//! format, speech as a WAV in chunks, rerank scores; refusals naming the field; the faults.

use base64::Engine as _;

use super::*;

const CT: &str = "multipart/form-data; boundary=sim-test";

/// A multipart body of `parts` (name, file name, bytes), in order.
fn form(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, file, content) in parts {
        let file = file
            .map(|f| format!("; filename=\"{f}\""))
            .unwrap_or_default();
        let head =
            format!("--sim-test\r\nContent-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n");
        b.extend_from_slice(head.as_bytes());
        b.extend_from_slice(content);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"--sim-test--\r\n");
    b
}

/// POSTs an upload to `path` under the base URL.
async fn upload(sim: &Sim, path: &str, body: Vec<u8>) -> reqwest::Response {
    client()
        .post(format!("{}{path}", sim.base_url()))
        .header("content-type", CT)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Whether `png` is the sim's PNG: signature, a 4×4 IHDR, and IEND last.
fn assert_png(png: &[u8]) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(&png[16..24], &[0, 0, 0, 4, 0, 0, 0, 4]);
    assert!(png.ends_with(b"IEND\xae\x42\x60\x82"));
}

fn b64(s: &Value) -> Vec<u8> {
    let s = s.as_str().unwrap();
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[tokio::test]
async fn images_are_a_valid_png_as_base64_or_a_data_url() {
    let sim = Sim::start("gpu").await.unwrap();
    let url = format!("{}/images/generations", sim.base_url());
    let resp = post(url.clone(), json!({"model":"sdxl","prompt":"a fox","n":2}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_png(&b64(&v["data"][0]["b64_json"]));
    assert_eq!(v["data"][1]["revised_prompt"], "a fox");
    assert!(v["created"].as_u64().unwrap() > 0);
    let body = json!({"prompt":"a fox","response_format":"url"});
    let v: Value = post(url.clone(), body).await.unwrap().json().await.unwrap();
    let data_url = v["data"][0]["url"].as_str().unwrap();
    let png = data_url.strip_prefix("data:image/png;base64,").unwrap();
    assert_png(&b64(&json!(png)));
    for (body, param) in [
        (json!({"n":1}), "prompt"),
        (json!({"prompt":"x","n":11}), "n"),
        (
            json!({"prompt":"x","response_format":"png"}),
            "response_format",
        ),
    ] {
        let resp = post(url.clone(), body).await.unwrap();
        assert_eq!(resp.status(), 400);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    assert_eq!(sim.hits("/v1/images/generations"), 5);
}

#[tokio::test]
async fn edits_and_variations_read_the_uploaded_picture() {
    let sim = Sim::start("gpu").await.unwrap();
    let picture: &[u8] = b"\x89PNG\x00\xff\x00 not really";
    let edit = form(&[
        ("image", Some("in.png"), picture),
        ("prompt", None, b"add a hat"),
        ("response_format", None, b"url"),
        ("model", None, b"sdxl"),
    ]);
    let resp = upload(&sim, "/images/edits", edit.clone()).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["data"][0]["revised_prompt"], "add a hat");
    assert!(v["data"][0]["url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png"));
    assert_eq!(sim.last_body().unwrap(), edit);
    let vary = form(&[("image[]", Some("in.png"), picture), ("n", None, b"3")]);
    let v: Value = upload(&sim, "/images/variations", vary)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 3);
    assert!(v["data"][0].get("revised_prompt").is_none());
    let no_picture = form(&[("prompt", None, b"add a hat")]);
    let resp = upload(&sim, "/images/edits", no_picture).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["param"], "image");
    let broken = b"--sim-test\r\nno headers end".to_vec();
    let resp = upload(&sim, "/images/variations", broken).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("multipart"),
        "{v}"
    );
}

/// A transcription upload asking for `format`, if any.
fn speech_form(format: Option<&str>) -> Vec<u8> {
    let mut parts: Vec<(&str, Option<&str>, &[u8])> = vec![
        ("file", Some("a.wav"), b"RIFF\x00\xff"),
        ("model", None, b"whisper"),
    ];
    if let Some(f) = format {
        parts.push(("response_format", None, f.as_bytes()));
    }
    form(&parts)
}

#[tokio::test]
async fn transcripts_come_in_every_format_openai_answers() {
    let sim = Sim::start("cpu").await.unwrap();
    let resp = upload(&sim, "/audio/transcriptions", speech_form(None)).await;
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"text":"ok from cpu"})
    );
    let resp = upload(&sim, "/audio/transcriptions", speech_form(Some("text"))).await;
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert_eq!(resp.text().await.unwrap(), "ok from cpu\n");
    let resp = upload(
        &sim,
        "/audio/translations",
        speech_form(Some("verbose_json")),
    )
    .await;
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        (v["task"].as_str(), v["text"].as_str()),
        (Some("translate"), Some("ok from cpu"))
    );
    assert_eq!(v["segments"][0]["text"], "ok from cpu");
    let srt = upload(&sim, "/audio/transcriptions", speech_form(Some("srt"))).await;
    assert!(srt
        .text()
        .await
        .unwrap()
        .starts_with("1\n00:00:00,000 --> "));
    let vtt = upload(&sim, "/audio/transcriptions", speech_form(Some("vtt"))).await;
    assert!(vtt.text().await.unwrap().starts_with("WEBVTT\n\n"));
    let bad = upload(&sim, "/audio/transcriptions", speech_form(Some("mp3"))).await;
    assert_eq!(bad.status(), 400);
    let no_file = upload(
        &sim,
        "/audio/transcriptions",
        form(&[("model", None, b"w")]),
    )
    .await;
    let v: Value = no_file.json().await.unwrap();
    assert_eq!(v["error"]["param"], "file");
    let streamed = form(&[("file", Some("a.wav"), b"RIFF"), ("stream", None, b"true")]);
    let resp = upload(&sim, "/audio/transcriptions", streamed).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let events: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(events.len(), 4, "{text}");
    assert_eq!(
        events[0],
        json!({"type":"transcript.text.delta","delta":"cpu-0 "})
    );
    assert_eq!(events[3]["text"], "cpu-0 cpu-1 cpu-2 ");
}

/// POSTs a speech request.
async fn speak(sim: &Sim) -> reqwest::Response {
    let body = json!({"model":"tts","input":"hello","voice":"alloy"});
    post(format!("{}/audio/speech", sim.base_url()), body)
        .await
        .unwrap()
}

#[tokio::test]
async fn speech_is_a_valid_wav_in_chunks() {
    let sim = Sim::start("gpu").await.unwrap();
    let resp = speak(&sim).await;
    assert_eq!(resp.headers()["content-type"], "audio/wav");
    let mut frames = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(b) = body.next().await {
        frames.push(b.unwrap());
    }
    assert!(
        frames.len() >= 2,
        "a header and chunks, several frames: {}",
        frames.len()
    );
    let wav: Vec<u8> = frames.concat();
    let data = 3 * media_audio_chunk();
    assert_eq!(wav.len(), 44 + data);
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(&wav[8..16], b"WAVEfmt ");
    assert_eq!(
        u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize,
        36 + data
    );
    assert_eq!(
        u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize,
        data
    );
    let bad = post(
        format!("{}/audio/speech", sim.base_url()),
        json!({"voice":"alloy"}),
    );
    let v: Value = bad.await.unwrap().json().await.unwrap();
    assert_eq!(v["error"]["param"], "input");
}

/// Bytes of one speech chunk.
fn media_audio_chunk() -> usize {
    crate::sim::media::SPEECH_CHUNK
}

#[tokio::test(start_paused = true)]
async fn speech_drips_cuts_and_stalls_chunk_by_chunk() {
    let sim = Sim::start("gpu").await.unwrap();
    sim.set(Fault::Drip(Duration::from_secs(2)));
    let start = tokio::time::Instant::now();
    let (_, failed) = drain(speak(&sim).await).await;
    assert!(!failed);
    assert!(
        start.elapsed() >= Duration::from_secs(8),
        "header and three chunks, 2 s each"
    );
    sim.set(Fault::CutAfter(2));
    let mut body = speak(&sim).await.bytes_stream();
    let mut got = 0;
    let failed = loop {
        match body.next().await {
            Some(Ok(b)) => got += b.len(),
            Some(Err(_)) => break true,
            None => break false,
        }
    };
    assert!(failed, "the connection is cut");
    assert_eq!(
        got,
        44 + media_audio_chunk(),
        "the header and one chunk came first"
    );
    sim.set(Fault::StallAfter(1));
    let mut body = speak(&sim).await.bytes_stream();
    assert_eq!(body.next().await.unwrap().unwrap().len(), 44);
    let hour = Duration::from_secs(3600);
    assert!(tokio::time::timeout(hour, body.next()).await.is_err());
}

#[tokio::test]
async fn rerank_scores_each_document_best_first_on_every_alias() {
    let sim = Sim::start("gpu").await.unwrap();
    let docs = json!(["cats purr", "the fox jumps over the dog", {"text":"a brown fox"}]);
    let body = json!({"model":"bge","query":"brown fox","documents":docs,"top_n":2});
    for url in [
        format!("{}/rerank", sim.base_url()),
        format!("{}/reranking", sim.base_url()),
        format!("{}/rerank", sim.root_url()),
    ] {
        let v: Value = post(url, body.clone()).await.unwrap().json().await.unwrap();
        assert_eq!(v["model"], "bge");
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{v}");
        assert_eq!(
            (
                results[0]["index"].as_u64(),
                results[0]["relevance_score"].as_f64()
            ),
            (Some(2), Some(1.0))
        );
        assert_eq!(
            (
                results[1]["index"].as_u64(),
                results[1]["relevance_score"].as_f64()
            ),
            (Some(1), Some(0.5))
        );
    }
    let with_docs = json!({"query":"cats","documents":["cats purr"],"return_documents":true});
    let v: Value = post(format!("{}/rerank", sim.base_url()), with_docs)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["results"][0]["document"]["text"], "cats purr");
    for (body, param) in [
        (json!({"documents":["a"]}), "query"),
        (json!({"query":"a","documents":[]}), "documents"),
        (json!({"query":"a","documents":[1]}), "documents"),
        (json!({"query":"a","documents":["a"],"top_n":0}), "top_n"),
    ] {
        let resp = post(format!("{}/rerank", sim.base_url()), body)
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        assert_eq!(resp.json::<Value>().await.unwrap()["error"]["param"], param);
    }
}

#[tokio::test]
async fn the_shared_faults_reach_every_media_route() {
    let sim = Sim::start("gpu").await.unwrap();
    let image = || {
        post(
            format!("{}/images/generations", sim.base_url()),
            json!({"prompt":"x"}),
        )
    };
    sim.set(Fault::Status {
        code: 503,
        retry_after: None,
    });
    assert_eq!(image().await.unwrap().status(), 503);
    assert_eq!(
        upload(&sim, "/audio/transcriptions", speech_form(None))
            .await
            .status(),
        503
    );
    sim.set(Fault::Malformed);
    assert!(image().await.unwrap().json::<Value>().await.is_err());
    sim.set(Fault::Huge(300_000));
    let big = image().await.unwrap().bytes().await.unwrap();
    assert_eq!(big.len(), 300_000);
    let v: Value = serde_json::from_slice(&big).unwrap();
    assert_png(&b64(&v["data"][0]["b64_json"]));
    let wav = speak(&sim).await.bytes().await.unwrap();
    assert_eq!(wav.len(), 300_000);
    assert_eq!(
        u32::from_le_bytes(wav[40..44].try_into().unwrap()),
        300_000 - 44
    );
    sim.set(Fault::CutAfter(0));
    assert!(
        image().await.unwrap().bytes().await.is_err(),
        "headers, then a cut"
    );
    sim.set(Fault::Reset);
    assert!(image().await.is_err());
    assert_eq!(sim.hits("/v1/images/generations"), 5);
    assert_eq!(sim.work_hits(), 7);
}

#[tokio::test(start_paused = true)]
async fn drawing_takes_the_time_it_is_told_and_nothing_else_waits() {
    let sim = Sim::start("cpu").await.unwrap();
    sim.set_image_time(Duration::from_secs(90));
    let start = tokio::time::Instant::now();
    let url = format!("{}/images/generations", sim.base_url());
    let resp = post(url, json!({"prompt":"a fox"})).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(start.elapsed() >= Duration::from_secs(90));
    let start = tokio::time::Instant::now();
    speak(&sim).await.bytes().await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(90),
        "speech does not draw"
    );
}
