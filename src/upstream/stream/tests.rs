//! Unit tests of the stream tails: when an upstream stream counts as finished.

use super::tail::TAIL;
use super::*;

fn events(chunks: &[&[u8]]) -> bool {
    let mut t = EventTail::new();
    for c in chunks {
        t.observe(c);
    }
    t.finished()
}

#[test]
fn a_responses_stream_is_finished_by_the_event_that_ends_the_response() {
    let done =
        b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{}}\n\n";
    assert!(events(&[b"event: response.created\ndata: {}\n\n", done]));
    // Split anywhere.
    for cut in 1..done.len() {
        assert!(events(&[&done[..cut], &done[cut..]]), "split at {cut}");
    }
    // Named by its data alone (no event: lines), or incomplete, or failed.
    assert!(events(&[b"data: {\"type\": \"response.incomplete\"}\n\n"]));
    assert!(events(&[b"event: response.failed\n"]));
    // Deltas, or a text that says the words, do not finish it.
    assert!(!events(&[b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"response.completed\"}\n\n"]));
    assert!(!events(&[b"data: {\"type\":\"response.created\"}\n\n"]));
    assert!(!events(&[]));
}

fn finished(chunks: &[&[u8]]) -> bool {
    let mut t = DoneTail::new();
    for c in chunks {
        t.observe(c);
    }
    t.finished()
}

fn done_line(chunks: &[&[u8]]) -> bool {
    let mut t = DoneLine::new();
    for c in chunks {
        t.observe(c);
    }
    t.finished()
}

#[test]
fn an_ndjson_stream_is_done_when_its_last_line_says_so() {
    let last = br#"{"model":"m","done":true,"done_reason":"stop","eval_count":3}"#;
    assert!(done_line(&[b"{\"done\":false}\n", last, b"\n"]));
    assert!(
        done_line(&[b"{\"done\":false}\n", last]),
        "no newline after it"
    );
    assert!(done_line(&[b"{\"do", b"ne\": ", b"tr", b"ue}\n\n  \n"]));
    // A done line followed by anything else (an error line) is not done.
    assert!(!done_line(&[last, b"\n{\"error\":\"boom\"}\n"]));
    assert!(!done_line(&[b"{\"done\":false}\n{\"done\":tr"]));
    // Text cannot fake it: inside a string the quotes are escaped.
    assert!(!done_line(&[
        br#"{"response":"\"done\":true","done":false}"#
    ]));
    assert!(!done_line(&[]));
}

#[test]
fn a_last_line_done_at_its_top_level_finishes_an_ndjson_stream() {
    assert!(done_line(&[
        b"{\"response\":\"a\"}\n{\"done\": ",
        b"true, \"x\":1}\n\n"
    ]));
    assert!(done_line(&[
        b"{\"message\":{\"content\":\"}{\"},\"done\":true}"
    ]));
    assert!(!done_line(&[b"{\"done\":true}\n{\"done\":false}\n"]));
    assert!(!done_line(&[b"{\"response\":\"\\\"done\\\":true\"}\n"]));
    assert!(!done_line(&[]));
}

/// Found by tests/fuzz.rs: `{"done": true}` as a tool call's arguments, on a line that
/// says `"done": false`, was read as a finished stream.
#[test]
fn a_tool_calls_arguments_done_true_do_not_finish_a_stream() {
    let line = br#"{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"done":true}}}]},"done":false}"#;
    assert!(!done_line(&[line, b"\n"]));
    assert!(!done_line(&[&line[..60], &line[60..]]));
    let last =
        br#"{"message":{"tool_calls":[{"function":{"arguments":{"done":false}}}]},"done":true}"#;
    assert!(done_line(&[line, b"\n", last]));
}

#[test]
fn done_split_across_chunks_still_counts() {
    assert!(finished(&[b"data: {}\n\ndata: [DO", b"", b"NE]\n\n"]));
    assert!(finished(&[b"data: [", b"D", b"O", b"N", b"E", b"]"]));
    assert!(!finished(&[b"data: [DONE]", &[b'x'; TAIL]]));
    assert!(!finished(&[b"data: {\"cut\": tr", b"ue}"]));
    assert!(!finished(&[]));
}
