//! Unit tests of OpenAI SSE streams translated to Ollama NDJSON, on tokio's paused clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::time::advance;

use super::*;

const AT: &str = "2026-11-30T14:02:11.5Z";
const MAX: usize = 4096;

/// The wall time every test line is stamped with: 2026-11-30T14:02:11.5Z.
fn fixed() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_047_331_500)
}

fn ndjson(call: Call, max_line: usize) -> Ndjson {
    let mut n = Ndjson::new(call, "qwen3:latest".into(), Instant::now(), max_line);
    n.wall = fixed;
    n
}

fn text(out: &Bytes) -> &str {
    std::str::from_utf8(out).unwrap()
}

/// One `data:` event of a chat chunk with `choice` (llama-server's field order).
fn chunk(choice: &str) -> String {
    format!(
        "data: {{\"choices\":[{choice}],\"created\":1764500000,\"id\":\"chatcmpl-1\",\"model\":\"qwen3\",\"object\":\"chat.completion.chunk\"}}\n\n"
    )
}

/// A chat line carrying `message` (JSON object text).
fn line(message: &str) -> String {
    format!(r#"{{"model":"qwen3:latest","created_at":"{AT}","message":{message},"done":false}}"#)
        + "\n"
}

/// A chat stream as llama-server sends it: role, reasoning, content (UTF-8 to split mid-char),
/// finish, usage, [DONE]; with a comment and an `event:` line to ignore.
fn chat_stream() -> Vec<String> {
    vec![
        ": ping\n\n".into(),
        chunk(r#"{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}"#),
        chunk(r#"{"finish_reason":null,"index":0,"delta":{"reasoning_content":"Hm."}}"#),
        chunk(r#"{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}"#),
        "event: message\r\ndata:".to_string()
            + r#"{"choices":[{"index":0,"delta":{"content":", wörld ✓"}}]}"#
            + "\r\n\r\n",
        chunk(r#"{"finish_reason":null,"index":0,"delta":{"content":""}}"#),
        chunk(r#"{"finish_reason":"stop","index":0,"delta":{}}"#),
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n".into(),
        "data: [DONE]\n\n".into(),
    ]
}

/// The lines `chat_stream` becomes when no time passes.
fn chat_lines() -> String {
    [
        line(r#"{"role":"assistant","content":"","thinking":"Hm."}"#),
        line(r#"{"role":"assistant","content":"Hello"}"#),
        line(r#"{"role":"assistant","content":", wörld ✓"}"#),
        format!(r#"{{"model":"qwen3:latest","created_at":"{AT}","message":{{"role":"assistant","content":""}},"done":true,"done_reason":"stop","total_duration":0,"load_duration":0,"prompt_eval_count":12,"prompt_eval_duration":0,"eval_count":3,"eval_duration":0}}"#) + "\n",
    ]
    .concat()
}

#[tokio::test(start_paused = true)]
async fn a_chat_stream_becomes_exact_lines_each_as_soon_as_its_chunk_is_complete() {
    let mut n = ndjson(Call::Chat, MAX);
    let events = chat_stream();
    let want = chat_lines();
    let want: Vec<&str> = want.split_inclusive('\n').collect();
    let mut lines = Vec::new();
    for (i, event) in events.iter().enumerate() {
        advance(Duration::from_millis(100)).await;
        let out = n.push(event.as_bytes()).unwrap();
        lines.push(text(&out).to_string());
        assert_eq!(n.done(), i == events.len() - 1);
    }
    let (empty, some) = ("", |i: usize| want[i]);
    assert_eq!(lines[..3], [empty, empty, some(0)]);
    assert_eq!(lines[3..6], [some(1), some(2), empty]);
    assert_eq!(lines[6..8], [empty, empty]);
    // Started at 0; first token (reasoning) at 300 ms; [DONE] at 900 ms.
    let last = format!(
        r#"{{"model":"qwen3:latest","created_at":"{AT}","message":{{"role":"assistant","content":""}},"done":true,"done_reason":"stop","total_duration":900000000,"load_duration":0,"prompt_eval_count":12,"prompt_eval_duration":300000000,"eval_count":3,"eval_duration":600000000}}"#
    ) + "\n";
    assert_eq!(lines[8], last);
    assert!(n
        .push(b"data: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n")
        .unwrap()
        .is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_same_bytes_split_anywhere_give_the_same_output() {
    let whole = chat_stream().concat();
    let bytes = whole.as_bytes();
    let want = chat_lines();
    for at in 0..=bytes.len() {
        let mut n = ndjson(Call::Chat, MAX);
        let mut out = n.push(&bytes[..at]).unwrap().to_vec();
        out.extend_from_slice(&n.push(&bytes[at..]).unwrap());
        assert_eq!(std::str::from_utf8(&out).unwrap(), want, "split at {at}");
        assert!(n.done());
    }
    // Many random splits (xorshift, fixed seed), a byte at a time among them.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..200 {
        let mut n = ndjson(Call::Chat, MAX);
        let (mut out, mut rest) = (Vec::new(), bytes);
        while !rest.is_empty() {
            let take = 1 + (xorshift(&mut seed) % 40) as usize;
            let (piece, tail) = rest.split_at(take.min(rest.len()));
            out.extend_from_slice(&n.push(piece).unwrap());
            rest = tail;
        }
        assert_eq!(std::str::from_utf8(&out).unwrap(), want);
    }
}

#[tokio::test(start_paused = true)]
async fn tool_call_fragments_become_one_tool_calls_line() {
    let mut n = ndjson(Call::Chat, MAX);
    let events = [
        chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}}"#,
        ),
        chunk(
            r#"{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}},{"index":1,"id":"call_b","function":{"name":"time","arguments":"{}"}}]}}"#,
        ),
        chunk(
            r#"{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"\"Paris\"}"}}]}}"#,
        ),
    ];
    for event in &events {
        assert!(n.push(event.as_bytes()).unwrap().is_empty());
    }
    let out = n
        .push(chunk(r#"{"index":0,"delta":{},"finish_reason":"tool_calls"}"#).as_bytes())
        .unwrap();
    assert_eq!(
        text(&out),
        line(
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_a","function":{"index":0,"name":"weather","arguments":{"city":"Paris"}}},{"id":"call_b","function":{"index":1,"name":"time","arguments":{}}}]}"#
        )
    );
    let out = n.push(b"data: [DONE]\n\n").unwrap();
    assert!(
        text(&out).contains(r#""done":true,"done_reason":"stop""#),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("tool_calls"));
}

#[tokio::test(start_paused = true)]
async fn tool_calls_without_a_finish_reason_are_sent_at_done() {
    let mut n = ndjson(Call::Chat, MAX);
    let call = chunk(
        r#"{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1"}}]}}"#,
    );
    assert!(n.push(call.as_bytes()).unwrap().is_empty());
    let out = n.push(b"data: [DONE]\n").unwrap();
    let lines: Vec<&str> = text(&out).lines().collect();
    assert_eq!(lines.len(), 2);
    // Broken arguments JSON: an empty object (see line::tool_call); no id sent, none made up.
    assert!(
        lines[0].contains(r#""tool_calls":[{"function":{"index":0,"name":"f","arguments":{}}}]"#)
    );
    assert!(lines[1].contains(r#""done":true"#));
}

#[tokio::test(start_paused = true)]
async fn generate_streams_response_lines_from_chat_or_text_chunks() {
    let mut n = ndjson(Call::Generate, MAX);
    let mut out = n
        .push(chunk(r#"{"index":0,"delta":{"reasoning":"so"}}"#).as_bytes())
        .unwrap()
        .to_vec();
    out.extend_from_slice(
        &n.push(chunk(r#"{"index":0,"delta":{"content":"Hi"}}"#).as_bytes())
            .unwrap(),
    );
    out.extend_from_slice(
        &n.push(chunk(r#"{"index":0,"text":" there","finish_reason":"length"}"#).as_bytes())
            .unwrap(),
    );
    out.extend_from_slice(&n.push(b"data: [DONE]\n\n").unwrap());
    let head = format!(r#"{{"model":"qwen3:latest","created_at":"{AT}","#);
    let want = [
        format!(r#"{head}"response":"","thinking":"so","done":false}}"#),
        format!(r#"{head}"response":"Hi","done":false}}"#),
        format!(r#"{head}"response":" there","done":false}}"#),
        format!(
            r#"{head}"response":"","done":true,"done_reason":"length","total_duration":0,"load_duration":0,"prompt_eval_duration":0,"eval_duration":0}}"#
        ),
    ];
    assert_eq!(std::str::from_utf8(&out).unwrap(), want.join("\n") + "\n");
}

#[tokio::test(start_paused = true)]
async fn durations_without_any_token_are_all_prompt_evaluation() {
    let mut n = ndjson(Call::Chat, MAX);
    advance(Duration::from_millis(250)).await;
    let out = n.push(b"data: [DONE]\n").unwrap();
    let want = r#""total_duration":250000000,"load_duration":0,"prompt_eval_duration":250000000,"eval_duration":0}"#;
    assert!(text(&out).ends_with(&format!("{want}\n")), "{}", text(&out));
}

#[tokio::test(start_paused = true)]
async fn an_error_event_is_an_error_and_stays_one() {
    let mut n = ndjson(Call::Chat, MAX);
    let first = n
        .push(chunk(r#"{"index":0,"delta":{"content":"a"}}"#).as_bytes())
        .unwrap();
    assert!(!first.is_empty());
    let e =
        n.push(b"data: {\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n");
    assert_eq!(e.unwrap_err(), "the machine's stream failed: out of memory");
    assert_eq!(
        n.push(b"data: [DONE]\n").unwrap_err(),
        "the machine's stream failed: out of memory"
    );
    assert!(!n.done());
    let mut n = ndjson(Call::Chat, MAX);
    assert_eq!(
        n.push(b"data: {\"error\":\"bad\\nthing\"}\n").unwrap_err(),
        "the machine's stream failed: bad\\nthing"
    );
}

/// Found by tests/fuzz.rs: the lines a chunk completed before an error event in the same
/// chunk were lost, so the client's stream depended on where the machine's bytes were split.
#[tokio::test(start_paused = true)]
async fn lines_before_an_error_in_the_same_chunk_are_kept() {
    let content = chunk(r#"{"index":0,"delta":{"content":"a"}}"#);
    let error = "data: {\"error\":{\"message\":\"out of memory\"}}\n\n";
    let mut split = ndjson(Call::Chat, MAX);
    let first = split.push(content.as_bytes()).unwrap();
    assert!(split.push(error.as_bytes()).is_err());
    let mut whole = ndjson(Call::Chat, MAX);
    let mut out = Vec::new();
    let e = whole.push_into(format!("{content}{error}").as_bytes(), &mut out);
    assert_eq!(e.unwrap_err(), "the machine's stream failed: out of memory");
    assert_eq!(out, first.to_vec());
    let mut more = Vec::new();
    assert!(whole.push_into(b"data: [DONE]\n", &mut more).is_err());
    assert!(more.is_empty());
}

#[tokio::test(start_paused = true)]
async fn over_long_lines_and_tool_calls_are_errors() {
    let mut n = ndjson(Call::Chat, 64);
    assert!(n.push(&[b'x'; 40]).unwrap().is_empty());
    let e = n.push(&[b'x'; 40]).unwrap_err();
    assert_eq!(e, "the machine's stream sent a line longer than 64 bytes");
    let mut n = ndjson(Call::Chat, 64);
    assert!(
        n.push(&[b'y'; 65]).is_err(),
        "a line over the bound in one chunk"
    );

    let mut n = ndjson(Call::Chat, 200);
    let piece = r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}]}}]}"#;
    for _ in 0..2 {
        n.push(format!("{piece}\n").as_bytes()).unwrap();
    }
    let e = n.push(format!("{piece}\n").as_bytes()).unwrap_err();
    assert_eq!(e, "the machine's tool calls are longer than 200 bytes");
}

#[tokio::test(start_paused = true)]
async fn multi_line_data_is_joined_and_bad_data_refused() {
    let mut n = ndjson(Call::Chat, MAX);
    let out = n
        .push(b"data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"joined\"}}]}\n\n")
        .unwrap();
    assert_eq!(
        text(&out),
        line(r#"{"role":"assistant","content":"joined"}"#)
    );
    let e = n.push(b"data: {not json\n\n").unwrap_err();
    assert_eq!(
        e,
        "the machine's stream sent data that is not JSON: {not json"
    );
    let mut n = ndjson(Call::Chat, MAX);
    let ignored = b"data: 42\ndata: \"text\"\ndata:\nid: 7\nretry: 10\n: hi\nfoo\ndata: {\"object\":\"x\"}\n\n";
    assert!(n.push(ignored).unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn garbage_never_panics() {
    let mut seed: u64 = 0xDEAD_BEEF_CAFE_F00D;
    let alphabet = b"data: {}[]\",:\n\r\xff\xc3DONE choices delta content tool_calls index 0 1";
    for round in 0..300u32 {
        let call = if round.is_multiple_of(2) {
            Call::Chat
        } else {
            Call::Generate
        };
        let mut n = ndjson(call, 256);
        for _ in 0..20 {
            let len = xorshift(&mut seed) % 64;
            let piece: Vec<u8> = (0..len)
                .map(|_| {
                    let r = xorshift(&mut seed);
                    let i = (r >> 8) as usize % alphabet.len();
                    if r.is_multiple_of(3) {
                        (r >> 8) as u8
                    } else {
                        alphabet[i]
                    }
                })
                .collect();
            if n.push(&piece).is_err() {
                break;
            }
        }
    }
}

/// The next number of a xorshift generator (fixed seeds: the tests are repeatable).
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[tokio::test(start_paused = true)]
async fn each_chunks_logprobs_ride_on_its_line() {
    let mut n = ndjson(Call::Chat, MAX);
    let event = chunk(
        r#"{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.25,"bytes":[72,105]},{"token":"Yo","logprob":-1.5,"bytes":null,"extra":1}]}]}}"#,
    );
    let out = n.push(event.as_bytes()).unwrap();
    let want = r#"{"model":"qwen3:latest","created_at":"2026-11-30T14:02:11.5Z","message":{"role":"assistant","content":"Hi"},"done":false,"logprobs":[{"bytes":[72,105],"logprob":-0.25,"token":"Hi","top_logprobs":[{"bytes":[72,105],"logprob":-0.25,"token":"Hi"},{"logprob":-1.5,"token":"Yo"}]}]}"#;
    assert_eq!(text(&out), format!("{want}\n"));
    // A chunk without logprobs: a line without them.
    let out = n
        .push(chunk(r#"{"index":0,"delta":{"content":"!"}}"#).as_bytes())
        .unwrap();
    assert!(!text(&out).contains("logprobs"), "{}", text(&out));
}
