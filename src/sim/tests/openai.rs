//! OpenAI's whole answers as clients read them: completions with usage, one embedding per
//! input (as floats or base64), and inputs of the wrong shape refused.

use base64::Engine as _;

use super::*;

/// POSTs `body` to `path` under the OpenAI base URL: the status and the JSON answer.
async fn answer(sim: &Sim, path: &str, body: Value) -> (u16, Value) {
    let resp = post(format!("{}{path}", sim.base_url()), body)
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test]
async fn a_completions_answer_carries_usage_and_its_object() {
    let sim = Sim::start("alpha").await.unwrap();
    let (status, v) = answer(&sim, "/completions", json!({"model":"m1","prompt":"x"})).await;
    assert_eq!(status, 200);
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["model"], "m1");
    assert_eq!(v["choices"][0]["text"], "ok from alpha");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens":1,"completion_tokens":3,"total_tokens":4})
    );
}

#[tokio::test]
async fn embeddings_answer_one_vector_per_input_in_order() {
    let sim = Sim::start("alpha").await.unwrap();
    let cases = [
        (json!("a"), 1),
        (json!(["a", "b", "c"]), 3),
        (json!([1, 2, 3]), 1),
        (json!([[1, 2], [3], [4, 5]]), 3),
    ];
    for (input, n) in cases {
        let body = json!({"model":"e1","input":input});
        let (status, v) = answer(&sim, "/embeddings", body).await;
        assert_eq!(status, 200, "{input}: {v}");
        assert_eq!((&v["object"], &v["model"]), (&json!("list"), &json!("e1")));
        let data = v["data"].as_array().unwrap();
        assert_eq!(data.len(), n, "{input}: {v}");
        for (i, d) in data.iter().enumerate() {
            let expected = json!({"object":"embedding","index":i,"embedding":[0.1,0.2,0.3]});
            assert_eq!(d, &expected);
        }
        let usage = &v["usage"];
        assert!(usage["prompt_tokens"].as_u64().unwrap() >= 1, "{v}");
        assert_eq!(usage["total_tokens"], usage["prompt_tokens"]);
    }
    assert_eq!(sim.hits("/v1/embeddings"), 4);
}

#[tokio::test]
async fn base64_embeddings_are_little_endian_f32s() {
    let sim = Sim::start("alpha").await.unwrap();
    let body = json!({"model":"e1","input":["a","b"],"encoding_format":"base64"});
    let (status, v) = answer(&sim, "/embeddings", body).await;
    assert_eq!(status, 200, "{v}");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(
            (&d["object"], &d["index"]),
            (&json!("embedding"), &json!(i))
        );
        let text = d["embedding"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(floats, [0.1f32, 0.2, 0.3]);
    }
    let body = json!({"model":"e1","input":"a","encoding_format":"float"});
    let (_, v) = answer(&sim, "/embeddings", body).await;
    assert_eq!(v["data"][0]["embedding"], json!([0.1, 0.2, 0.3]));
}

#[tokio::test]
async fn embeddings_of_the_wrong_shape_are_a_400_naming_the_field() {
    let sim = Sim::start("alpha").await.unwrap();
    let cases = [
        (json!({"model":"e1"}), "input"),
        (json!({"model":"e1","input":5}), "input"),
        (json!({"model":"e1","input":[]}), "input"),
        (json!({"model":"e1","input":["a",1]}), "input"),
        (json!({"model":"e1","input":[[1],"a"]}), "input"),
        (
            json!({"model":"e1","input":"a","encoding_format":"hex"}),
            "encoding_format",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = answer(&sim, "/embeddings", body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        let error = &v["error"];
        assert_eq!(error["type"], "invalid_request_error", "{v}");
        assert_eq!(error["param"], field, "{v}");
        assert!(error["message"].as_str().unwrap().contains(field), "{v}");
    }
}
