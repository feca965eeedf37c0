// The npm clients of scripts/clients.sh (`openai` and `ollama`), each through labrouter.
//
// `node clients.cjs CLIENT ROUTER` (NODE_PATH names the npm prefix's node_modules) prints
// one line per check: `PASS CLIENT CHECK` or `FAIL CLIENT CHECK: what it read instead`.
// The lab and what its sims answer are described in scripts/clients/clients.py.
"use strict";

const assert = require("node:assert");

const [client, router] = process.argv.slice(2);
const WHOLE = "ok from ubuntu-box";
const STREAMED = "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ";
const TOOL_ANSWER = "tool said: 22 C in sim";
const VECTOR = [0.1, 0.2, 0.3];
const PROMPT = "fix this bug";
const PARAMS = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
};

async function check(name, want, read) {
  let got;
  try {
    got = await read();
  } catch (e) {
    got = `threw ${e && e.name}: ${e && e.message}`;
    console.error(e);
  }
  try {
    assert.deepStrictEqual(got, want);
    console.log(`PASS ${client} ${name}`);
  } catch {
    console.log(`FAIL ${client} ${name}: read ${JSON.stringify(got)}, wanted ${JSON.stringify(want)}`);
  }
}

const round = (v) => v.map((x) => Math.round(x * 1e6) / 1e6);

async function openaiChecks() {
  const { OpenAI } = require("openai");
  const ai = new OpenAI({ baseURL: `${router}/v1`, apiKey: "lab", maxRetries: 0 });
  const ask = [{ role: "user", content: PROMPT }];
  await check("chat", WHOLE, async () =>
    (await ai.chat.completions.create({ model: "code", messages: ask })).choices[0].message.content);
  await check("stream", STREAMED, async () => {
    let text = "";
    const stream = await ai.chat.completions.create({ model: "code", messages: ask, stream: true });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  });
  const tools = [{ type: "function", function: { name: "weather", parameters: PARAMS } }];
  await check("tools", ["weather", { city: "sim" }, TOOL_ANSWER], async () => {
    const messages = [{ role: "user", content: "weather?" }];
    const asked = (await ai.chat.completions.create({ model: "code", messages, tools })).choices[0].message;
    const call = asked.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    messages.push(asked, { role: "tool", tool_call_id: call.id, content: `22 C in ${args.city}` });
    const answer = await ai.chat.completions.create({ model: "code", messages, tools });
    return [call.function.name, args, answer.choices[0].message.content];
  });
  await check("embeddings", [VECTOR, VECTOR], async () =>
    (await ai.embeddings.create({ model: "embed", input: ["a", "b"] })).data.map((d) => round(d.embedding)));
  await check("responses", WHOLE, async () =>
    (await ai.responses.create({ model: "code", input: PROMPT })).output_text);
  await check("responses-stream", STREAMED, async () => {
    let text = "";
    const stream = await ai.responses.create({ model: "code", input: PROMPT, stream: true });
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta;
    return text;
  });
  await check("responses-retrieve", WHOLE, async () => {
    const made = await ai.responses.create({ model: "code", input: PROMPT });
    return (await ai.responses.retrieve(made.id)).output_text;
  });
  await check("models-retrieve", "code", async () => (await ai.models.retrieve("code")).id);
}

async function ollamaChecks() {
  const { Ollama } = require("ollama");
  const ollama = new Ollama({ host: router });
  const ask = [{ role: "user", content: PROMPT }];
  await check("chat", WHOLE, async () => (await ollama.chat({ model: "code", messages: ask })).message.content);
  await check("stream", STREAMED, async () => {
    let text = "";
    for await (const part of await ollama.chat({ model: "code", messages: ask, stream: true })) {
      text += part.message.content;
    }
    return text;
  });
  const tools = [{ type: "function", function: { name: "weather", parameters: PARAMS } }];
  await check("tools", ["weather", { city: "sim" }, TOOL_ANSWER], async () => {
    const messages = [{ role: "user", content: "weather?" }];
    const asked = (await ollama.chat({ model: "code", messages, tools })).message;
    const call = asked.tool_calls[0].function;
    messages.push(asked, { role: "tool", content: `22 C in ${call.arguments.city}` });
    const answer = await ollama.chat({ model: "code", messages, tools });
    return [call.name, call.arguments, answer.message.content];
  });
  await check("embed", [VECTOR, VECTOR], async () =>
    (await ollama.embed({ model: "embed", input: ["a", "b"] })).embeddings.map(round));
  await check("list", true, async () => (await ollama.list()).models.some((m) => m.name === "code:latest"));
}

const clients = { "npm-openai": openaiChecks, "npm-ollama": ollamaChecks };
clients[client]().catch((e) => {
  console.error(e);
  process.exit(1);
});
