//! `{{after.N}}` filled in, and parents' outputs read, as the follow-ups see them.

use super::*;

#[test]
fn a_parents_text_goes_into_content_and_prompt_only() {
    let parent = "say \"hi\"\nthen {{after.0}} — ünïcode ✓".to_string();
    let req = br#"{"model":"{{after.0}}","messages":[{"role":"user","content":"use: {{after.0}}!"},{"role":"user","content":[{"type":"text","text":"[{{after.0}}]"},{"type":"image_url","image_url":{"url":"{{after.0}}"}}]}],"tools":[{"x":"{{after.0}}"}]}"#;
    let out = substitute(Endpoint::Chat, req, std::slice::from_ref(&parent), 1 << 20).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["model"], "{{after.0}}");
    assert_eq!(v["messages"][0]["content"], format!("use: {parent}!"));
    assert_eq!(
        v["messages"][1]["content"][0]["text"],
        format!("[{parent}]")
    );
    assert_eq!(
        v["messages"][1]["content"][1]["image_url"]["url"],
        "{{after.0}}"
    );
    assert_eq!(v["tools"][0]["x"], "{{after.0}}");
    // One pass: the parent's own "{{after.0}}" was not replaced again.
    assert!(v["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("then {{after.0}}"));
    let out = substitute(
        Endpoint::Completions,
        br#"{"prompt":["a {{after.1}} b","{{after.0}}{{after.9}}"]}"#,
        &["x".into(), "y".into()],
        1 << 20,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["prompt"][0], "a y b");
    assert_eq!(v["prompt"][1], "x{{after.9}}");
}

#[test]
fn a_fill_past_its_budget_is_refused_with_the_size_it_would_have() {
    let req = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "{{after.0}}".repeat(1000)
    );
    let parent = "a\"b".repeat(500); // 2,000 bytes as JSON
    let size = req.len() + 1000 * (2000 - 11);
    assert_eq!(
        substitute(
            Endpoint::Chat,
            req.as_bytes(),
            std::slice::from_ref(&parent),
            size - 1
        ),
        Err(Unfilled::TooLarge {
            size,
            max: size - 1
        })
    );
    let out = substitute(Endpoint::Chat, req.as_bytes(), &[parent], size).unwrap();
    assert_eq!(out.len(), size, "the count is exact for compact JSON");
    // A request with no placeholder to fill is sent as it came, whatever its size.
    let plain = br#"{"messages":[{"role":"user","content":"{{after.7}}"}]}"#;
    assert_eq!(
        substitute(Endpoint::Chat, plain, &["x".into()], 1)
            .unwrap()
            .as_ref(),
        plain
    );
}

#[test]
fn outputs_are_read_from_answers() {
    let chat = br#"{"choices":[{"message":{"content":"done"},"finish_reason":"stop"}]}"#;
    assert_eq!(output(Endpoint::Chat, chat), Output::Text("done".into()));
    let cut = br#"{"choices":[{"message":{"content":"do"},"finish_reason":"length"}]}"#;
    assert!(matches!(output(Endpoint::Chat, cut), Output::Unusable(_)));
    let none = br#"{"choices":[{"message":{"content":null}}]}"#;
    assert!(matches!(output(Endpoint::Chat, none), Output::Unusable(_)));
    let text = br#"{"choices":[{"text":"t"}]}"#;
    assert_eq!(
        output(Endpoint::Completions, text),
        Output::Text("t".into())
    );
}

#[test]
fn a_responses_follow_up_reads_its_parents_output_text_and_fills_its_input() {
    let answer = br#"{"object":"response","status":"completed","output":[
        {"type":"reasoning","summary":[]},
        {"type":"message","role":"assistant","content":[
            {"type":"output_text","text":"first "},{"type":"refusal","refusal":"no"},
            {"type":"output_text","text":"second"}]}]}"#;
    let parent = match output(Endpoint::Responses, answer) {
        Output::Text(t) => t,
        Output::Unusable(why) => panic!("{why}"),
    };
    assert_eq!(parent, "first second");
    let cut = br#"{"status":"incomplete","output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}"#;
    assert!(matches!(
        output(Endpoint::Responses, cut),
        Output::Unusable(_)
    ));
    let calls = br#"{"status":"completed","output":[{"type":"function_call","name":"f","arguments":"{}"}]}"#;
    assert!(matches!(
        output(Endpoint::Responses, calls),
        Output::Unusable(_)
    ));

    let req = br#"{"model":"m","instructions":"{{after.0}}","input":[{"role":"user","content":[{"type":"input_text","text":"review: {{after.0}}"},{"type":"input_image","image_url":"{{after.0}}"}]},{"role":"user","content":"and {{after.0}}"}]}"#;
    let out = substitute(
        Endpoint::Responses,
        req,
        std::slice::from_ref(&parent),
        1 << 20,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["input"][0]["content"][0]["text"], "review: first second");
    assert_eq!(v["input"][0]["content"][1]["image_url"], "{{after.0}}");
    assert_eq!(v["input"][1]["content"], "and first second");
    assert_eq!(v["instructions"], "{{after.0}}", "input only");
    let plain = substitute(
        Endpoint::Responses,
        br#"{"input":"go on from {{after.0}}"}"#,
        &[parent],
        1 << 20,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(v["input"], "go on from first second");
}

/// A finished task of `endpoint` whose answer was `body`.
fn parent(endpoint: Endpoint, body: &[u8]) -> Task {
    Task {
        seq: 0,
        id: TaskId::new(),
        owner: String::new(),
        status: crate::outcome::TaskStatus::Succeeded,
        endpoint,
        route: None,
        accept: crate::task::Accept::Chain,
        priority: 0,
        after: Vec::new(),
        metadata: Default::default(),
        created_ms: 0,
        started_ms: None,
        finished_ms: None,
        deadline_ms: 0,
        attempts_used: 0,
        max_attempts: 3,
        interrupted: 0,
        attempts: Vec::new(),
        waiting_for: None,
        result: Some(crate::task::TaskResult::new(200, "m@x".into(), body)),
        error: None,
        callback: None,
    }
}

#[test]
fn an_image_parent_or_a_gone_one_leaves_its_follow_up_unusable_naming_it() {
    let chat = parent(
        Endpoint::Chat,
        br#"{"choices":[{"message":{"content":"words"},"finish_reason":"stop"}]}"#,
    );
    let image = parent(
        Endpoint::ImagesGenerations,
        br#"{"created":1,"data":[{"b64_json":"AAAA"}]}"#,
    );
    let after = vec![chat.id.clone(), image.id.clone()];
    let got = outputs(&after, &[Some(chat.clone()), Some(image.clone())]);
    let (code, why) = got.unwrap_err();
    assert_eq!(code, TaskCode::DependencyUnusable);
    assert_eq!(why, format!("after[1] {}: an image has no text", image.id));
    let (_, why) = outputs(&after, &[Some(chat.clone()), None]).unwrap_err();
    assert!(why.ends_with("it has no answer"), "{why}");
    assert_eq!(outputs(&after[..1], &[Some(chat)]).unwrap(), ["words"]);
}
