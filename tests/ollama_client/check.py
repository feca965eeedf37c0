"""The official `ollama` Python client against labrouter (docs/api.md "The Ollama endpoints").

Run by tests/ollama_client.rs as `python check.py BASE SCENARIO`; prints one JSON object
of what the client saw, which the Rust test asserts on together with what reached each
simulated machine. Any exception fails the run (non-zero exit, traceback on stderr).
"""

import json
import sys

import ollama


def basics(client):
    out = {}
    out["tags"] = [m.model for m in client.list().models]

    r = client.chat(model="code", messages=[{"role": "user", "content": "fix this bug"}])
    out["chat"] = r.message.content
    out["chat_done"] = r.done

    parts = list(client.chat(model="code:latest", stream=True,
                             messages=[{"role": "user", "content": "refactor"}]))
    out["stream"] = "".join(p.message.content or "" for p in parts)
    out["stream_last_done"] = parts[-1].done
    out["stream_done_reason"] = parts[-1].done_reason

    r = client.generate(model="small", prompt="fn main() {", suffix="}\n")
    out["generate_suffix"] = r.response

    parts = list(client.generate(model="small", prompt="hello", stream=True))
    out["generate_stream"] = "".join(p.response or "" for p in parts)
    out["generate_eval_count"] = parts[-1].eval_count

    r = client.embed(model="coder-gpu", input=["one", "two"])
    out["embed_gpu"] = len(r.embeddings)
    r = client.embed(model="small", input="one")
    out["embed_small"] = r.embeddings

    out["ps"] = [m.model for m in client.ps().models]

    r = client.show("coder-gpu")
    out["show_gpu_context"] = (r.modelinfo or {}).get("llama.context_length")
    r = client.show("small")
    out["show_small_capabilities"] = list(r.capabilities or [])

    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "the weather in a city",
        "parameters": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string"}}}}}]
    r = client.chat(model="small", tools=tools,
                    messages=[{"role": "user", "content": "weather in Paris?"}])
    call = r.message.tool_calls[0]
    out["tool_name"] = call.function.name
    out["tool_args"] = dict(call.function.arguments)
    messages = [
        {"role": "user", "content": "weather in Paris?"},
        r.message,
        {"role": "tool", "tool_name": call.function.name, "content": "22 C"},
    ]
    r = client.chat(model="small", tools=tools, messages=messages)
    out["tool_answer"] = r.message.content

    r = client.chat(model="small", format="json",
                    messages=[{"role": "user", "content": "as json"}])
    out["json"] = json.loads(r.message.content)

    r = client.chat(model="small", think=True,
                    messages=[{"role": "user", "content": "think first"}])
    out["thinking"] = r.message.thinking

    try:
        client.chat(model="nope", messages=[{"role": "user", "content": "hi"}])
        out["unknown"] = None
    except ollama.ResponseError as e:
        out["unknown"] = {"status": e.status_code, "error": e.error}

    try:
        client.pull("code")
        out["pull"] = "success"
    except ollama.ResponseError as e:
        out["pull"] = {"status": e.status_code, "error": e.error}
    return out


def fallback(client):
    seen = []
    for _ in range(4):
        parts = list(client.chat(model="code", stream=True,
                                 messages=[{"role": "user", "content": "refactor it"}]))
        seen.append({"text": "".join(p.message.content or "" for p in parts),
                     "done": parts[-1].done})
    return {"seen": seen}


def main():
    base, scenario = sys.argv[1], sys.argv[2]
    client = ollama.Client(host=base, timeout=60)
    out = {"basics": basics, "fallback": fallback}[scenario](client)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
