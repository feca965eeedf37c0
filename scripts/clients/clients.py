"""The Python clients of scripts/clients.sh, each through labrouter as its users drive it.

`python clients.py CLIENT ROUTER` (ROUTER is http://127.0.0.1:PORT) prints one line per
check: `PASS CLIENT CHECK` or `FAIL CLIENT CHECK: what it read instead`. A check that
raises is a FAIL with the exception; nothing is skipped.

The lab behind ROUTER (see scripts/clients.sh): the GPU box is away, so `code` is served
by the CPU box's OpenAI sim, which answers "ok from ubuntu-box", streams "ubuntu-box-0
ubuntu-box-1 ubuntu-box-2 ", calls the first tool offered with every required argument
"sim", answers a tool's result with "tool said: RESULT", and embeds every input as
[0.1, 0.2, 0.3].
"""

import asyncio
import json
import os
import subprocess
import sys
import traceback

CLIENT, ROUTER = sys.argv[1], sys.argv[2]
OPENAI_BASE = ROUTER + "/v1"
WHOLE = "ok from ubuntu-box"
STREAMED = "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 "
TOOL_ANSWER = "tool said: 22 C in sim"
VECTOR = [0.1, 0.2, 0.3]
PROMPT = "fix this bug"
failed = []


def check(name, want, read):
    """Runs `read()` and compares what it returns with `want`: one PASS or FAIL line."""
    try:
        got = read()
    except Exception as e:  # noqa: BLE001 - any failure of the client is the check's
        got = f"raised {type(e).__name__}: {e}"
        traceback.print_exc()
    said(name, want, got)


async def acheck(name, want, read):
    """`check` for a coroutine function `read`."""
    try:
        got = await read()
    except Exception as e:  # noqa: BLE001 - any failure of the client is the check's
        got = f"raised {type(e).__name__}: {e}"
        traceback.print_exc()
    said(name, want, got)


def said(name, want, got):
    """The PASS or FAIL line of one check."""
    if got == want:
        print(f"PASS {CLIENT} {name}", flush=True)
    else:
        failed.append(name)
        print(f"FAIL {CLIENT} {name}: read {got!r}, wanted {want!r}", flush=True)


def weather(city: str) -> str:
    """The weather in a city."""
    return f"22 C in {city}"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}

# === llm (with llm-ollama, and labrouter as an OpenAI-compatible model) ===


def llm(*args):
    """The llm CLI's output for `args`, as its users run it."""
    exe = os.path.join(os.path.dirname(sys.executable), "llm")
    done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OLLAMA_HOST": ROUTER}, check=False)
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.strip()}"
    return done.stdout.strip()


def llm_checks():
    home = os.environ["LLM_USER_PATH"]
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "extra-openai-models.yaml"), "w", encoding="utf-8") as f:
        f.write(f"- model_id: lab-code\n  model_name: code\n  api_base: \"{OPENAI_BASE}\"\n"
                "  supports_tools: true\n")
    functions = 'def weather(city: str) -> str:\n    "The weather."\n    return "22 C in " + city'
    check("ollama-models", True, lambda: "ollama/code" in llm("models", "list"))
    check("ollama-chat", WHOLE, lambda: llm("-m", "ollama/code", "--no-stream", PROMPT))
    check("ollama-stream", STREAMED.strip(), lambda: llm("-m", "ollama/code", PROMPT))
    check("ollama-tools", TOOL_ANSWER,
          lambda: llm("-m", "ollama/code", "--functions", functions, "weather?"))
    check("ollama-embed-models", True, lambda: "ollama/embed" in llm("embed-models", "list"))
    check("ollama-embed", VECTOR,
          lambda: json.loads(llm("embed", "-m", "ollama/embed", "-c", "hello")))
    check("openai-chat", WHOLE, lambda: llm("-m", "lab-code", "--no-stream", PROMPT))
    check("openai-stream", STREAMED.strip(), lambda: llm("-m", "lab-code", PROMPT))
    check("openai-tools", TOOL_ANSWER,
          lambda: llm("-m", "lab-code", "--functions", functions, "weather?"))


# === LangChain ===


def langchain_openai_checks():
    from langchain_core.messages import ToolMessage
    from langchain_openai import ChatOpenAI, OpenAI, OpenAIEmbeddings

    chat = ChatOpenAI(model="code", base_url=OPENAI_BASE, api_key="lab", max_retries=0)
    check("chat", WHOLE, lambda: chat.invoke(PROMPT).content)
    check("stream", STREAMED, lambda: "".join(c.content for c in chat.stream(PROMPT)))

    def tools():
        asked = chat.bind_tools([weather]).invoke("weather?")
        call = asked.tool_calls[0]
        answer = chat.bind_tools([weather]).invoke([
            ("user", "weather?"), asked,
            ToolMessage(content=weather(**call["args"]), tool_call_id=call["id"])])
        return [call["name"], call["args"], answer.content]
    check("tools", ["weather", {"city": "sim"}, TOOL_ANSWER], tools)

    responses = ChatOpenAI(model="code", base_url=OPENAI_BASE, api_key="lab", max_retries=0,
                           use_responses_api=True)
    check("responses", WHOLE, lambda: responses.invoke(PROMPT).text)
    check("responses-stream", STREAMED,
          lambda: "".join(c.text for c in responses.stream(PROMPT)))
    completions = OpenAI(model="code", base_url=OPENAI_BASE, api_key="lab", max_retries=0)
    check("completions", WHOLE, lambda: completions.invoke("def f():"))
    embeddings = OpenAIEmbeddings(model="embed", base_url=OPENAI_BASE, api_key="lab",
                                  check_embedding_ctx_length=False, max_retries=0)
    check("embeddings", [VECTOR, VECTOR],
          lambda: [[round(x, 6) for x in v] for v in embeddings.embed_documents(["a", "b"])])


def langchain_ollama_checks():
    from langchain_core.messages import ToolMessage
    from langchain_ollama import ChatOllama, OllamaEmbeddings

    chat = ChatOllama(model="code", base_url=ROUTER)
    # langchain-ollama streams even for invoke(), and joins the pieces.
    check("chat", STREAMED, lambda: chat.invoke(PROMPT).content)
    check("stream", STREAMED, lambda: "".join(c.content for c in chat.stream(PROMPT)))

    def tools():
        asked = chat.bind_tools([weather]).invoke("weather?")
        call = asked.tool_calls[0]
        answer = chat.bind_tools([weather]).invoke([
            ("user", "weather?"), asked,
            ToolMessage(content=weather(**call["args"]), tool_call_id=call["id"])])
        return [call["name"], call["args"], answer.content]
    check("tools", ["weather", {"city": "sim"}, TOOL_ANSWER], tools)
    embeddings = OllamaEmbeddings(model="embed", base_url=ROUTER)
    check("embeddings", [VECTOR, VECTOR],
          lambda: [[round(x, 6) for x in v] for v in embeddings.embed_documents(["a", "b"])])


# === LiteLLM (the SDK, as a client) ===


def litellm_checks():
    import litellm

    litellm.telemetry = False
    at = {"api_base": OPENAI_BASE, "api_key": "lab"}
    ask = [{"role": "user", "content": PROMPT}]
    check("chat", WHOLE,
          lambda: litellm.completion(model="openai/code", messages=ask, **at)
          .choices[0].message.content)
    check("stream", STREAMED, lambda: "".join(
        c.choices[0].delta.content or ""
        for c in litellm.completion(model="openai/code", messages=ask, stream=True, **at)))

    def tools():
        asked = litellm.completion(model="openai/code", tools=[WEATHER_TOOL], **at,
                                   messages=[{"role": "user", "content": "weather?"}])
        call = asked.choices[0].message.tool_calls[0]
        args = json.loads(call.function.arguments)
        answer = litellm.completion(model="openai/code", tools=[WEATHER_TOOL], **at, messages=[
            {"role": "user", "content": "weather?"}, asked.choices[0].message.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": weather(**args)}])
        return [call.function.name, args, answer.choices[0].message.content]
    check("tools", ["weather", {"city": "sim"}, TOOL_ANSWER], tools)
    check("embeddings", [VECTOR, VECTOR], lambda: [
        [round(x, 6) for x in d["embedding"]]
        for d in litellm.embedding(model="openai/embed", input=["a", "b"], **at).data])
    check("responses", WHOLE,
          lambda: litellm.responses(model="openai/code", input=PROMPT, **at).output_text)
    check("ollama-chat", WHOLE, lambda: litellm.completion(
        model="ollama_chat/code", messages=ask, api_base=ROUTER).choices[0].message.content)


# === The OpenAI Agents SDK (Responses, its default) ===


def agents_checks():
    asyncio.run(agents_run())


async def agents_run():
    import agents
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=OPENAI_BASE, api_key="lab", max_retries=0)
    agents.set_default_openai_client(client, use_for_tracing=False)
    tool = agents.function_tool(weather)
    agent = agents.Agent(name="helper", instructions="Use the tool.", model="code",
                         tools=[tool])

    async def run():
        return (await agents.Runner.run(agent, "weather?")).final_output

    async def streamed():
        run = agents.Runner.run_streamed(agent, "weather?")
        async for _ in run.stream_events():
            pass
        return run.final_output

    async def plain():
        answer = agents.Agent(name="plain", instructions="Answer.", model="code")
        return (await agents.Runner.run(answer, PROMPT)).final_output

    await acheck("responses-tool", TOOL_ANSWER, run)
    await acheck("responses-stream-tool", TOOL_ANSWER, streamed)
    await acheck("responses", WHOLE, plain)


CLIENTS = {
    "llm": llm_checks,
    "langchain-openai": langchain_openai_checks,
    "langchain-ollama": langchain_ollama_checks,
    "litellm": litellm_checks,
    "agents-sdk": agents_checks,
}

if __name__ == "__main__":
    CLIENTS[CLIENT]()
