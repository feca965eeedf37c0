"""The official `openai` Python SDK against a simulated machine, no router between.

Run by tests/sim_clients.rs as `python check.py BASE_URL`; prints one JSON object of what
the SDK read, which the Rust test asserts on together with what reached the machine. Any
exception fails the run (non-zero exit, traceback on stderr): an answer the SDK cannot
read is a failure, never a skip.
"""

import json
import sys

import openai

HI = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def chats(client, out):
    r = client.chat.completions.create(model="m1", messages=HI)
    out["chat"] = r.choices[0].message.content
    out["chat_total_tokens"] = r.usage.total_tokens

    chunks = list(client.chat.completions.create(model="m1", messages=HI, stream=True))
    out["stream"] = "".join(c.choices[0].delta.content or "" for c in chunks)
    out["stream_role"] = chunks[0].choices[0].delta.role
    out["stream_finish"] = chunks[-1].choices[0].finish_reason

    chunks = list(client.chat.completions.create(
        model="m1", messages=HI, stream=True, stream_options={"include_usage": True}))
    out["usage_stream"] = "".join(
        c.choices[0].delta.content or "" for c in chunks if c.choices)
    out["usage_stream_finish"] = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
    out["usage_stream_tokens"] = chunks[-1].usage.completion_tokens


def completions(client, out):
    r = client.completions.create(model="m1", prompt="def f():")
    out["completion"] = r.choices[0].text
    out["completion_object"] = r.object
    out["completion_usage"] = [r.usage.prompt_tokens, r.usage.completion_tokens,
                               r.usage.total_tokens]


def embeddings(client, out):
    # No encoding_format: the SDK asks for base64 and decodes it itself.
    r = client.embeddings.create(model="e1", input=["a", "b", "c"])
    out["embeddings"] = [[round(x, 6) for x in d.embedding] for d in r.data]
    out["embedding_indexes"] = [d.index for d in r.data]
    out["embedding_tokens"] = r.usage.prompt_tokens


def responses(client, out):
    r = client.responses.create(model="m1", input="hi")
    out["response"] = r.output_text
    out["response_status"] = r.status
    out["response_id"] = r.id
    out["response_total_tokens"] = r.usage.total_tokens

    events = list(client.responses.create(model="m1", input="hi", stream=True))
    out["response_events"] = [e.type for e in events]
    out["response_deltas"] = "".join(
        e.delta for e in events if e.type == "response.output_text.delta")
    out["response_streamed"] = events[-1].response.output_text

    # The SDK's own accumulator rebuilds the Response from the events.
    with client.responses.stream(model="m1", input="hi") as stream:
        for _ in stream:
            pass
        out["response_accumulated"] = stream.get_final_response().output_text

    r = client.responses.create(model="m1", input="weather?", tools=[WEATHER])
    call = r.output[0]
    out["response_call"] = [call.type, call.name, json.loads(call.arguments)]
    r = client.responses.create(model="m1", tools=[WEATHER], input=[
        {"role": "user", "content": "weather?"},
        {"type": "function_call_output", "call_id": call.call_id, "output": "22 C"},
    ])
    out["response_after_call"] = r.output_text


def main():
    client = openai.OpenAI(base_url=sys.argv[1], api_key="sim", max_retries=0, timeout=30)
    out = {"sdk": openai.__version__}
    chats(client, out)
    completions(client, out)
    embeddings(client, out)
    responses(client, out)
    out["models"] = [m.id for m in client.models.list()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
