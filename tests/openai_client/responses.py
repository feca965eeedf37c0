"""The official `openai` Python SDK's Responses calls through labrouter.

Run by tests/openai_client.rs as `python responses.py BASE_URL SCENARIO`. Prints
`PAUSE what` when the test should change the lab (and waits for a line on stdin), then one
JSON object of what the SDK read, which the Rust test asserts on together with what reached
each simulated machine. Any exception fails the run (non-zero exit, traceback on stderr):
an answer the SDK cannot read is a failure, never a skip.
"""

import json
import sys

import openai

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


def pause(what):
    """Lets the test change the lab, and goes on when it says so."""
    print(f"PAUSE {what}", flush=True)
    sys.stdin.readline()


def stream_of(client, **kwargs):
    """Every event of a streamed Response: types, deltas, and the final Response."""
    events = list(client.responses.create(stream=True, **kwargs))
    last = events[-1]
    return {
        "types": [e.type for e in events],
        "deltas": "".join(e.delta for e in events if e.type == "response.output_text.delta"),
        "id": last.response.id if last.type == "response.completed" else None,
        "error": [last.code, last.message] if last.type == "error" else None,
    }


def not_found(call):
    """The status and error code of a call the SDK raised NotFoundError for."""
    try:
        call()
    except openai.NotFoundError as e:
        return [e.status_code, e.code]
    return None


def whole_and_streamed(client, out):
    """Plain (headers read too), streamed, accumulated by the SDK, and a tool call."""
    raw = client.responses.with_raw_response.create(model="code", input="fix this bug")
    r = raw.parse()
    out["plain"] = r.output_text
    out["plain_id"] = r.id
    out["plain_status"] = r.status
    out["target"] = raw.headers.get("x-labrouter-target")
    out["skipped"] = raw.headers.get("x-labrouter-skipped")

    out["stream"] = stream_of(client, model="code", input="fix this bug")

    with client.responses.stream(model="code", input="fix this bug") as stream:
        for _ in stream:
            pass
        out["accumulated"] = stream.get_final_response().output_text

    r = client.responses.create(model="code", input="fix this bug", tools=[WEATHER])
    call = r.output[0]
    out["call"] = [call.type, call.name, json.loads(call.arguments)]


def kept(client, out):
    """What labrouter kept: retrieve both kinds, delete one, and it is gone."""
    plain = client.responses.retrieve(out["plain_id"])
    out["retrieved"] = [plain.id, plain.output_text, plain.status, plain.model]
    streamed = client.responses.retrieve(out["stream"]["id"])
    out["retrieved_stream"] = streamed.output_text
    out["deleted"] = client.responses.delete(out["plain_id"])
    out["after_delete"] = not_found(lambda: client.responses.retrieve(out["plain_id"]))
    out["delete_again"] = not_found(lambda: client.responses.delete(out["plain_id"]))
    out["unknown"] = not_found(lambda: client.responses.retrieve("resp_never_made"))


def responses(client, out):
    whole_and_streamed(client, out)
    kept(client, out)


def cut(client, out):
    """A stream the machine cuts: before its first event, then after two."""
    out["before"] = stream_of(client, model="code", input="fix this bug")
    pause("cut after events")
    out["after"] = stream_of(client, model="code", input="fix this bug")


def conversation(client, out):
    """Three turns chained by previous_response_id; the GPU box goes away before turn 3."""
    one = client.responses.create(model="code", input="question one about code")
    two = stream_of(client, model="code", input="question two", previous_response_id=one.id)
    pause("the GPU box goes away")
    three = client.responses.create(
        model="code", input="question three", previous_response_id=two["id"])
    pause("turn three answered")
    out["ids"] = [one.id, two["id"], three.id]
    out["texts"] = [one.output_text, two["deltas"], three.output_text]
    out["three_previous"] = three.previous_response_id
    again = client.responses.retrieve(three.id)
    out["three_kept"] = [again.output_text, again.previous_response_id]
    unkept = client.responses.create(
        model="code", input="question four", previous_response_id=three.id, store=False)
    out["four"] = unkept.output_text
    out["four_kept"] = not_found(lambda: client.responses.retrieve(unkept.id))


def main():
    client = openai.OpenAI(base_url=sys.argv[1], api_key="lab", max_retries=0, timeout=30)
    out = {"sdk": openai.__version__}
    {"responses": responses, "cut": cut, "conversation": conversation}[sys.argv[2]](client, out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
