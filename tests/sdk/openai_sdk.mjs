// The official `openai` npm client against ragtor's OpenAI-compatible
// façade. Run by tests/integration/openai_facade_test.cpp:
//   node openai_sdk.mjs <base_url> <kb> <question>
// Exits 0 when every check passed; prints what failed otherwise. The last
// line is a JSON object the C++ test reads (e.g. the aborted session id).
import assert from "node:assert/strict";
import OpenAI from "openai";

const [baseURL, kb, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
const model = `kb:${kb}`;
const results = {};

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.stack || e}`);
    process.exitCode = 1;
  }
}

await check("models.list names the KB, its agents, auto and general", async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, "model");
    assert.equal(m.owned_by, "ragtor");
    ids.push(m.id);
  }
  for (const id of ["auto", "general", model, `${model}:hybrid_agent`, `${model}:graph_agent`])
    assert.ok(ids.includes(id), `${id} missing from ${ids}`);
});

let full = "";
await check("a non-streamed completion answers from the KB", async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: question }],
    some_unknown_field: { clients: "send many" },
  });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(r.choices[0].finish_reason, "stop");
  full = r.choices[0].message.content;
  assert.ok(full.length > 0, "empty answer");
  assert.ok(Array.isArray(r.citations) && r.citations.length > 0, "no citations");
  assert.match(full, /\[1\]/, "no [n] marker in the text");
  assert.ok(r.usage.total_tokens >= r.usage.completion_tokens);
});

await check("a streamed completion equals the non-streamed one, with usage", async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: question }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let role = null;
  let finish = null;
  let usage = null;
  let ids = new Set();
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    ids.add(chunk.id);
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, [], "the usage chunk has choices");
      usage = chunk.usage;
      continue;
    }
    assert.equal(usage, null, "a chunk after the usage chunk");
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(ids.size, 1, "chunks with different ids");
  assert.ok(chunks >= 3);
  assert.equal(role, "assistant");
  assert.equal(finish, "stop");
  assert.ok(usage && usage.total_tokens > 0, "no usage chunk");
  assert.equal(text, full);
});

await check("a conversation given as messages is answered statelessly", async () => {
  const r = await client.chat.completions.create({
    model: "general",
    messages: [
      { role: "system", content: "be brief" },
      { role: "user", content: "hello" },
      { role: "assistant", content: "Hi!" },
      { role: "user", content: [{ type: "text", text: "and goodbye" }] },
    ],
  });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(typeof r.choices[0].message.content, "string");
});

await check("an unknown model is a 404 APIError", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "kb:no_such_kb", messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof OpenAI.APIError && e.status === 404 && e.code === "model_not_found");
});

await check("tools are refused with a 400 APIError", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "function", function: { name: "f", parameters: {} } }],
    }),
    (e) => e instanceof OpenAI.APIError && e.status === 400 && e.param === "tools");
});

await check("AbortController abort stops a stored turn", async () => {
  const controller = new AbortController();
  const session = "sdk-abort";
  const stream = await client.chat.completions.create(
    { model, user: "sdk-user", messages: [{ role: "user", content: question }], stream: true },
    { signal: controller.signal, headers: { "X-Session-Id": session } });
  let text = "";
  let finish = null;
  // The SDK ends the iteration quietly on an abort (older versions throw).
  try {
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (text.length > 0) controller.abort();
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === "AbortError", String(e));
  }
  assert.ok(text.length > 0, "no content before the abort");
  assert.equal(finish, null, "the answer finished before the abort");
  results.aborted_session = session;
  results.aborted_user = "sdk-user";
  results.received = text;
});

console.log(JSON.stringify(results));
