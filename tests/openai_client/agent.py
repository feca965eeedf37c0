"""The OpenAI Agents SDK through labrouter: an Agent with a function tool, in the SDK's
default Responses mode (not chat completions).

Run by tests/openai_client.rs as `python agent.py BASE_URL SCENARIO`. Prints `PAUSE what`
when the test should change the lab (and waits for a line on stdin), then one JSON object
of what the agent did. Tracing is off (it would send spans to OpenAI): the agent talks to
BASE_URL only. Any exception fails the run.
"""

import asyncio
import json
import sys

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

import agents
from agents import Agent, Runner, function_tool

CALLS = []
SENT = []
PAUSE_IN_TOOL = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    CALLS.append(city)
    if PAUSE_IN_TOOL:
        # Between the agent's two model calls: the test changes the lab here.
        print(f"PAUSE {PAUSE_IN_TOOL.pop()}", flush=True)
        sys.stdin.readline()
    return f"22 C in {city}"


def agent():
    return Agent(name="helper", instructions="Answer with the tool's help.",
                 model="code", tools=[get_weather])


def summary(result):
    return {
        "final": result.final_output,
        "items": [i.type for i in result.new_items],
        "model_calls": len(result.raw_responses),
    }


async def default(out):
    """Runner.run, then Runner.run_streamed: each sends the whole input every turn."""
    out["run"] = summary(await Runner.run(agent(), "What is the weather in Paris?"))
    streamed = Runner.run_streamed(agent(), "What is the weather in Paris?")
    kinds = set()
    async for event in streamed.stream_events():
        kinds.add(event.type)
    out["streamed"] = summary(streamed)
    out["stream_event_kinds"] = sorted(kinds)


async def chained(out):
    """Server-side chaining: the second model call sends previous_response_id and the tool
    output only; the GPU box goes away while the tool runs."""
    PAUSE_IN_TOOL.append("the GPU box goes away")
    result = await Runner.run(agent(), "What is the weather in Paris?",
                              auto_previous_response_id=True)
    out["run"] = summary(result)


async def note_request(request):
    """What the SDK itself sent: previous_response_id and how many input items."""
    body = json.loads(request.content or b"{}")
    inputs = body.get("input")
    SENT.append([body.get("previous_response_id") is not None,
                 len(inputs) if isinstance(inputs, list) else 1])


async def main():
    agents.set_tracing_disabled(True)
    http = DefaultAsyncHttpxClient(event_hooks={"request": [note_request]})
    client = AsyncOpenAI(base_url=sys.argv[1], api_key="lab", max_retries=0, timeout=30,
                         http_client=http)
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_default_openai_api("responses")
    out = {"agents": agents.__version__ if hasattr(agents, "__version__") else None}
    await {"default": default, "chained": chained}[sys.argv[2]](out)
    out["calls"] = CALLS
    out["sent"] = SENT
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
