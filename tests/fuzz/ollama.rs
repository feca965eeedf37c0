//! Target 6: what Ollama clients and OpenAI-compatible machines send. `Request::read` on
//! Ollama bodies (and the `native`/`openai` bodies made of them), `Ndjson` on OpenAI SSE
//! streams under any chunking, `DoneLine` on NDJSON streams, `answer` on OpenAI answers:
//! no panic, output within a bound, nothing that depends on where the bytes were split.

use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::Unstructured;
use labrouter::ollama::translate::{answer, Ndjson, Request, Timing};
use labrouter::ollama::Call;
use labrouter::upstream::{DoneLine, Endpoint};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::grammar::Grammar;
use super::harness::{accepted, pick, rarely, show, Rng};
use super::request::backend;

type R<T> = arbitrary::Result<T>;

const CALLS: [Call; 4] = [Call::Chat, Call::Generate, Call::Embed, Call::Embeddings];

/// What the generators make: Ollama's request bodies, OpenAI's stream events and answers
/// (see [`Grammar`]).
const RULES: &str = r#"
chat = obj:model 85 model,messages 90 messages,tools 25 tools,options 30 options,
    format 20 format,think 20 think,stream 40 bool,keep_alive 15 keep_alive,prompt 5 text
generate = obj:model 85 model,prompt 85 text,system 30 text,suffix 30 text,raw 30 bool,
    images 30 images,template 10 text,context 5 vector,options 30 options,format 20 format,
    think 20 think,stream 40 bool,keep_alive 15 keep_alive,messages 5 messages
embed = obj:model 85 model,input 85 input,dimensions 20 dimensions,truncate 20 bool,
    options 20 options,keep_alive 15 keep_alive,stream 10 bool,prompt 5 text
embeddings = obj:model 85 model,prompt 85 text,options 20 options,stream 10 bool,
    keep_alive 15 keep_alive,input 5 input
model = lit:qwen3:4b|llama3.2:latest|:latest||coder
messages = list:8 message
message = 2*<user_message>|2*<assistant_message>|3*<tool_message>|<message_of>
user_message = obj:role 100 user,content 80 content,images 10 images
user = lit:user
assistant_message = obj:role 100 assistant,content 50 content,tool_calls 80 tool_calls,
    thinking 10 text
tool_message = obj:role 100 tool,content 80 content,tool_name 60 name
tool = lit:tool
message_of = obj:role 90 role,content 80 content,images 10 images,tool_calls 20 tool_calls,
    tool_name 20 name
role = lit:system|user|assistant|tool|USER|
content = 30*<text>|null|5|[{"type":"text","text":"hi"}]
text = 3*<words>|<nasty>
nasty = nasty
words = lit:hello||ünï ✓ 𝕏|a"b\c\nd|{"a":1}|"done":true|data: [DONE]\n\n
images = list:3 image
image = lit:8*iVBORw0KGgo=|/9j/4AAQSkZJRg|R0lGODlhAQAB|UklGRiQAAABXRUJQ|aGk-_||x y|data:,
tool_calls = list:3 tool_call
tool_call = obj:id 15 call_id,type 15 function_type,function 98 function
call_id = lit:call_0_0|call_abc
function_type = lit:function
function = obj:name 98 name,arguments 80 arguments
name = lit:get_weather|search|f|
arguments = 3*{"city":"Paris","n":2}|3*"{\"city\":\"Paris\"}"|"{broken"|""|{}|{"done":true}|5
tools = 3*[{"type":"function","function":{"name":"get_weather"}}]|[]|{}
options = obj:num_predict 50 num_predict,temperature 40 number,top_p 20 number,
    seed 20 number,stop 40 stop,num_ctx 30 number,repeat_penalty 15 number
num_predict = 3*-1|3*0|3*128|99999999999999999999|1e309|1.5|-2.5|"10"
number = 9*0.7|9*-1|9*42|1e300|"hot"|null
stop = 5*"\u000a"|5*["a","STOP"]|[]|[1]|5
format = 5*"json"|5*{"type":"object","properties":{"a":{"type":"string"}}}|""|"yaml"|5
think = 5*true|5*false|2*"high"|"low"|"medium"|"max"|1
bool = 9*true|9*false|null|"yes"|1
keep_alive = 5*"5m"|5*0|-1|"-1s"|true
input = 5*<text>|5*<texts>|5|[[1,2]]|["a",null]
texts = list:3 text
dimensions = 9*256|0|-1|1.5|"256"
event = 16*<chunk>|4*<finish>|2*<usage_event>|4*data: [DONE]|<odd>
finish = data: {"choices":[{"index":0,"delta":{},"finish_reason":<reason>}]}
usage_event = data: {"choices":[],"usage":<usage>}
odd = <nasty>|<long>|data:[DONE]|data: [DONE|: keep-alive|event: message|id: 7|data:|
    <joined>|data: {"error":<error>}|data: {"choices":[{"index":0,"text":<text>}]}|data: 5|
    data: {"choices":{}}|data: {"choices":[{"index":1,"delta":{"content":"other"}}]}
long = data: {"choices":[{"delta":{"content":"<xs>"}}]}
xs = repeat:3000 x
joined = data: {"choices":\ndata: [{"delta":{"content":"joined"}}]}
chunk = data: {"id":"c","choices":[{"index":0,"delta":<delta>}]}
delta = obj:role 10 assistant,content 60 content,reasoning_content 15 text,
    reasoning 10 text,tool_calls 30 delta_calls
assistant = lit:assistant
delta_calls = list:3 delta_call
delta_call = obj:index 80 index,id 30 call_id,function 90 delta_function
delta_function = obj:name 50 name,arguments 80 piece
piece = lit:{"|city|":"|Paris|"}|{"done":true}|[1e15,||{
index = 4*0|4*1|7|-1|18446744073709551615|null
reason = 3*"stop"|"length"|3*"tool_calls"|null|5
usage = obj:prompt_tokens 80 count,completion_tokens 80 count
count = 5|0|-1|1e20|18446744073709551615|null
error = {"message":"out of memory"}|"bad"|{}
answer = <completion>|<completion>|<vectors>|<vectors>|[]
completion = obj:id 30 text,choices 95 choices,usage 50 usage
choices = list:2 choice
choice = obj:index 30 index,message 80 said,text 30 text,finish_reason 60 reason
said = obj:role 50 assistant,content 80 content,reasoning_content 30 text,
    reasoning 20 text,tool_calls 30 tool_calls
vectors = obj:data 95 items,usage 50 usage,model 20 text
items = list:3 item
item = obj:embedding 90 vector,index 60 index
vector = [0.1,-0.2,3e10]|[]|[[1]]|"AAAA"|null
"#;

/// The grammar of [`RULES`].
fn rules() -> &'static Grammar {
    static GRAMMAR: OnceLock<Grammar> = OnceLock::new();
    GRAMMAR.get_or_init(|| Grammar::new(RULES))
}

/// `v` written and read back. serde_json reads some long decimals one ulp off (it lacks its
/// `float_roundtrip` feature here), so a body re-serialised equals this, not `v`.
fn again(v: &Value) -> Value {
    serde_json::from_str(&v.to_string()).expect("JSON reads back")
}

fn array_of<'a>(o: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    o.get(key).and_then(Value::as_array).map_or(&[], |a| a)
}

/// `Request::read` on an Ollama body, then its bodies for two machines.
fn request(u: &mut Unstructured<'_>) -> R<()> {
    let call = *pick(u, &[&CALLS[..], &[Call::Chat]].concat())?;
    let body = rules().bytes(u, &format!("{call:?}").to_lowercase(), 30)?;
    show("body", &String::from_utf8_lossy(&body));
    let req = match Request::read(call, &body) {
        Ok(req) => req,
        Err(e) => {
            let fields = "JSON model keep_alive options tools messages suffix system raw \
                          images prompt dimensions truncate input format think stream";
            assert!(fields.split(' ').any(|w| e.contains(w)), "where? {e:?}");
            return Ok(());
        }
    };
    accepted();
    let Ok(Value::Object(input)) = serde_json::from_slice::<Value>(&body) else {
        panic!("accepted a body that is not a JSON object")
    };
    let model = input.get("model").and_then(Value::as_str);
    assert_eq!(req.model.as_deref(), model.filter(|m| !m.is_empty()));
    let messages = array_of(&input, "messages");
    if call == Call::Chat {
        let user = messages.iter().rfind(|m| m["role"] == "user");
        let content = user.and_then(|m| m["content"].as_str());
        assert_eq!(req.text, content.unwrap_or_default());
    }
    let stream = input.get("stream").and_then(Value::as_bool).unwrap_or(true);
    assert_eq!(req.stream, stream && !call.embeds());
    for b in [backend(u)?, backend(u)?] {
        show("backend", &b);
        let Ok(Value::Object(mut native)) = serde_json::from_slice(&req.native(&b)) else {
            panic!("native({b:?}) is not a JSON object")
        };
        assert_eq!(native.remove("model"), Some(Value::String(b.clone())));
        let mut rest = input.clone();
        rest.remove("model");
        assert_eq!(Value::Object(native), again(&Value::Object(rest)));
        let (endpoint, out) = req.openai(&b);
        show("openai", &String::from_utf8_lossy(&out));
        let Ok(Value::Object(out)) = serde_json::from_slice(&out) else {
            panic!("openai({b:?}) is not a JSON object")
        };
        assert_eq!(out.get("model"), Some(&Value::String(b.clone())));
        let suffix = input.get("suffix").and_then(Value::as_str);
        let raw = input.get("raw") == Some(&Value::Bool(true));
        let expected = match call {
            Call::Generate if raw || suffix.is_some_and(|s| !s.is_empty()) => Endpoint::Completions,
            Call::Chat | Call::Generate => Endpoint::Chat,
            Call::Embed | Call::Embeddings => Endpoint::Embeddings,
        };
        assert_eq!(endpoint, expected);
        let streams = out.get("stream").and_then(Value::as_bool);
        assert_eq!(streams, (!call.embeds()).then_some(req.stream));
        if call == Call::Chat {
            chat(messages, array_of(&out, "messages"));
        }
    }
    Ok(())
}

/// A chat's OpenAI messages: one per Ollama message, same roles; an assistant's tool calls
/// get ids unique in the chat; each tool message answers the earliest unanswered call of
/// its `tool_name` (of any name without one, or when none matches), and `call_{i}`, which
/// no call has, only when every earlier call is answered (Ollama's messages carry no ids).
fn chat(input: &[Value], out: &[Value]) {
    assert_eq!(out.len(), input.len());
    let mut calls: Vec<(&str, &str, bool)> = Vec::new();
    for (i, (m, asked)) in out.iter().zip(input).enumerate() {
        let role = m["role"].as_str().expect("a role");
        assert_eq!(role, asked["role"]);
        let asked_calls = asked["tool_calls"].as_array().filter(|a| !a.is_empty());
        let made = m.get("tool_calls").and_then(Value::as_array);
        let expected = asked_calls.filter(|_| role == "assistant").map(Vec::len);
        assert_eq!(made.map(Vec::len), expected);
        let pairs = made
            .into_iter()
            .flatten()
            .zip(asked_calls.into_iter().flatten());
        for (c, asked) in pairs {
            let (id, name) = (c["id"].as_str().expect("an id"), &c["function"]["name"]);
            assert!(calls.iter().all(|(other, ..)| *other != id), "{id} twice");
            let args = c["function"]["arguments"]
                .as_str()
                .expect("string arguments");
            match &asked["function"]["arguments"] {
                Value::String(s) => assert_eq!(args, s),
                o @ Value::Object(_) => assert_eq!(serde_json::from_str(args).ok(), Some(again(o))),
                _ => assert_eq!(args, "{}"),
            }
            calls.push((id, name.as_str().expect("a name"), false));
        }
        let Some(id) = m.get("tool_call_id") else {
            assert_ne!(role, "tool", "message {i} answers no call");
            continue;
        };
        assert_eq!(role, "tool");
        let name = asked["tool_name"].as_str();
        let named = calls
            .iter()
            .position(|c| !c.2 && name.is_none_or(|n| c.1 == n));
        match named.or_else(|| calls.iter().position(|c| !c.2)) {
            Some(k) => {
                assert_eq!(id, calls[k].0, "message {i} answers the wrong call");
                calls[k].2 = true;
            }
            None => assert_eq!(id, &format!("call_{i}")),
        }
    }
}

/// How SSE lines end (a blank line ends an event), and how they seldom do.
const ENDS: [&str; 5] = ["\n\n", "\n\n", "\n", "\r\n\r\n", "\r\n"];
const ODD_ENDS: [&str; 3] = ["", "\r", "\r\r"];

/// An OpenAI SSE stream: events with their lines ended every way, near misses, junk.
fn sse(u: &mut Unstructured<'_>) -> R<Vec<u8>> {
    if rarely(u, 10)? {
        return Ok(u.bytes(u.len().min(512))?.to_vec());
    }
    let mut s = String::new();
    for _ in 0..u.int_in_range(0..=16)? {
        let mut event = rules().text(u, "event", 80)?;
        // The whitespace `object` puts in JSON, but mostly not a line break.
        if !rarely(u, 8)? && !event.contains("joined") {
            event = event.replace(['\r', '\n'], " ");
        }
        s += &event;
        let ends: &[&str] = if rarely(u, 16)? { &ODD_ENDS } else { &ENDS };
        s += pick(u, ends)?;
    }
    Ok(s.into_bytes())
}

/// NDJSON with what differs from one run to the next blanked: `created_at` and durations.
fn normal(bytes: &[u8]) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    for key in ["\"created_at\":\"", "_duration\":"] {
        let mut parts = s.split(key);
        let first = parts.next().unwrap_or_default().to_string();
        let time = |c: char| c.is_ascii_alphanumeric() || ":.-".contains(c);
        s = parts.fold(first, |all, p| all + key + p.trim_start_matches(time));
    }
    s
}

/// `Ndjson` on an SSE stream pushed whole, then in pieces.
fn ndjson(u: &mut Unstructured<'_>) -> R<()> {
    let call = *pick(u, &[Call::Chat, Call::Chat, Call::Generate, Call::Embed])?;
    let max_line = *pick(u, &[8usize, 300, 2000, 1 << 16, 1 << 16])?;
    let model = backend(u)?;
    let s = sse(u)?;
    show("sse", &String::from_utf8_lossy(&s));
    let new = || Ndjson::new(call, model.clone(), Instant::now(), max_line);
    let (mut whole, mut out) = (new(), Vec::new());
    let once = whole.push_into(&s, &mut out);
    let done = whole.done();
    show("ndjson", &(&once, String::from_utf8_lossy(&out)));
    match (&once, new().push(&s)) {
        (Ok(()), Ok(pushed)) => assert_eq!(normal(&pushed), normal(&out), "push differs"),
        (Err(a), Err(b)) => assert_eq!(*a, b),
        (a, b) => panic!("push_into: {a:?}, push: {b:?}"),
    }
    let lines: Vec<&[u8]> = out.split_inclusive(|&c| c == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line.last(), Some(&b'\n'), "a line without its end");
        let Ok(Value::Object(o)) = serde_json::from_slice(line) else {
            panic!("not a JSON object: {:?}", String::from_utf8_lossy(line))
        };
        assert_eq!(o.get("model"), Some(&Value::String(model.clone())));
        let last = done && i + 1 == lines.len();
        assert_eq!(o.get("done"), Some(&Value::Bool(last)));
    }
    let mut tail = DoneLine::new();
    tail.observe(&out);
    assert_eq!(tail.finished(), done, "DoneLine misreads the stream's end");
    // At most two lines per input line (text and tool calls, or tool calls and the last);
    // each costs its fixed fields and the model's name, and what it carries came from the
    // input, re-encoded 14x at most (3 bytes `{},` become an empty tool call).
    let ends = s.iter().filter(|&&c| c == b'\n').count();
    assert!(lines.len() <= 2 * ends, "{} lines from {ends}", lines.len());
    let bound = lines.len() * (300 + 6 * model.len()) + 16 * s.len();
    assert!(out.len() <= bound, "{} bytes out of {}", out.len(), s.len());
    let more = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n";
    match (&once, whole.push(more)) {
        (Ok(()), after) => assert!(!done || after.is_ok_and(|b| b.is_empty()), "after the end"),
        (Err(e), after) => assert_eq!(after.as_ref(), Err(e), "the error did not stay"),
    }
    if once.is_ok() {
        accepted();
    }
    for _ in 0..3 {
        let mut cuts = (0..u.int_in_range(0..=8)?)
            .map(|_| u.int_in_range(0..=s.len()))
            .collect::<R<Vec<_>>>()?;
        cuts.sort_unstable();
        let (mut n, mut got, mut outcome, mut at) = (new(), Vec::new(), Ok(()), 0);
        for c in cuts.into_iter().chain([s.len()]) {
            outcome = outcome.and_then(|()| n.push_into(&s[at..c], &mut got));
            at = c;
        }
        show("split", &String::from_utf8_lossy(&got));
        assert_eq!(outcome, once);
        let same = got == out || normal(&got) == normal(&out);
        assert!(same, "a split changes the output");
        assert_eq!(n.done(), done);
    }
    Ok(())
}

/// What `finished` means: whitespace other than "\n" aside, the last non-empty line has
/// `"done":true` among the bytes of its own object (strings followed, what is nested in an
/// object or array skipped). And when that line is a JSON object, its `done` is true.
fn done_oracle(s: &[u8]) -> bool {
    let mut squeezed = s.to_vec();
    squeezed.retain(|&c| c == b'\n' || !c.is_ascii_whitespace());
    let Some(line) = squeezed.split(|&c| c == b'\n').rfind(|l| !l.is_empty()) else {
        return false;
    };
    let (mut depth, mut string, mut escaped, mut top) = (0usize, false, false, Vec::new());
    for &b in line {
        let outer = depth == 1;
        match (string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, _, b'"') => string = !string,
            (false, _, b'{' | b'[') => depth += 1,
            (false, _, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
        // The line's own bytes; a gap (NUL: not in the key) for anything else.
        top.push(if outer && depth == 1 { b } else { 0 });
    }
    let done = top.windows(11).any(|w| w == br#""done":true"#);
    if let Ok(Value::Object(o)) = serde_json::from_slice(line) {
        assert_eq!(done, o.get("done") == Some(&Value::Bool(true)), "{o:?}");
    }
    done
}

/// `DoneLine` on an NDJSON stream as Ollama writes it, near misses and whitespace between.
fn done_line(u: &mut Unstructured<'_>) -> R<()> {
    let pieces = [
        r#"{"model":"m","done":true,"done_reason":"stop"}|{"done":false}|"done"|:|true|e"#,
        r#"{"message":{"tool_calls":[{"function":{"arguments":{"done":true}}}]},"done":false}"#,
        r#"{"done" :	true }|{"response":"\"done\":true"}|"done":tru|\| |{|}|["#,
        "\t|\r|\x0b|\x0c|\n|\r\n",
    ];
    let pieces: Vec<&str> = pieces.iter().flat_map(|p| p.split('|')).collect();
    let mut s = Vec::new();
    for _ in 0..u.int_in_range(0..=12)? {
        s.extend_from_slice(if rarely(u, 8)? {
            u.bytes(u.len().min(8))?
        } else {
            pick(u, &pieces)?.as_bytes()
        });
    }
    show("stream", &String::from_utf8_lossy(&s));
    let mut whole = DoneLine::new();
    whole.observe(&s);
    if whole.finished() {
        accepted();
    }
    assert_eq!(whole.finished(), done_oracle(&s));
    for _ in 0..3 {
        let (mut t, mut at) = (DoneLine::new(), 0);
        for _ in 0..u.int_in_range(0..=8)? {
            let to = u.int_in_range(at..=s.len())?;
            t.observe(&s[at..to]);
            at = to;
        }
        t.observe(&s[at..]);
        assert_eq!(t.finished(), whole.finished(), "a split changes the answer");
    }
    Ok(())
}

/// `answer` for every call on one OpenAI answer.
fn answers(u: &mut Unstructured<'_>) -> R<()> {
    let a = rules().bytes(u, "answer", 30)?;
    show("answer", &String::from_utf8_lossy(&a));
    let times = [Duration::ZERO, Duration::from_millis(5), Duration::MAX];
    let (total, first_token) = (*pick(u, &times)?, *pick(u, &times)?);
    let timing = Timing { total, first_token };
    for call in CALLS {
        let Ok(out) = answer(call, &a, "m", timing).map_err(|e| assert!(!e.is_empty())) else {
            continue;
        };
        accepted();
        let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(&out) else {
            panic!("{call:?}: not an object: {}", String::from_utf8_lossy(&out))
        };
        let key = ["done", "done", "embeddings", "embedding"][call as usize];
        let v = o.get(key);
        let ok = match v {
            Some(v) if call.embeds() => v.is_array(),
            v => v == Some(&true.into()),
        };
        assert!(ok, "{call:?}: {key} is {v:?}");
        assert!(call == Call::Embeddings || o.get("model") == Some(&"m".into()));
    }
    Ok(())
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    // A chat of tool calls takes many choices: the case's bytes, then more drawn from them.
    let mut rng = Rng::new(u.arbitrary()?);
    let mut bytes = u.bytes(u.len())?.to_vec();
    let given = bytes.len();
    bytes.resize(given + rng.below(8_192), 0);
    rng.fill(&mut bytes[given..]);
    let u = &mut Unstructured::new(&bytes);
    match u.int_in_range(0..=9)? {
        0..=3 => request(u),
        4..=6 => ndjson(u),
        7 => done_line(u),
        _ => answers(u),
    }
}

const NULLS: &str = r#"{"model":null,"messages":null,"prompt":null,"input":null}"#;

/// Inputs the generators make rarely: deep nesting, nulls, a line of exactly `max_line`.
pub fn extremes() {
    let deep = "[".repeat(99_999) + "1" + &"]".repeat(99_999);
    let deep = format!(r#"{{"messages":[],"x":{deep}}}"#);
    for call in CALLS {
        for body in [&deep, NULLS, " {} "] {
            if let Ok(req) = Request::read(call, body.as_bytes()) {
                let _ = (req.native("b\"\\"), req.openai("b\"\\"));
            }
        }
    }
    let line = r#"data: {"choices":[{"delta":{"content":"x"}}]}"#;
    for (max_line, ok) in [(line.len(), true), (line.len() - 1, false)] {
        let mut n = Ndjson::new(Call::Chat, "m".into(), Instant::now(), max_line);
        let pushed = n.push(format!("{line}\n").as_bytes());
        assert_eq!(pushed.is_ok(), ok, "{max_line}");
    }
}
