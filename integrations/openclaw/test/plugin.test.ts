// The plugin's translation and fail-open behaviour, under Node's test runner (node --test),
// against a small recording HTTP server standing in for `metaclaw serve`. The real service
// and the real OpenClaw are exercised together by tests/openclaw/ in the Python suite.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, test } from "node:test";

import plugin, { agentOf, metaclawCommand, MetaClawClient, readConfig, recentUserMessages, registerMetaClaw, turnCapture } from "../index.ts";

type Seen = { method: string; url: string; headers: Record<string, unknown>; body: any };
type Handler = (req: Seen) => { status?: number; body?: unknown; delayMs?: number };

let server: Server;
let url = "";
let seen: Seen[] = [];
let respond: Handler = () => ({ body: {} });
// GET /readyz is answered (and recorded) apart from the other routes: 200 unless a test says.
let probes: Seen[] = [];
let ready: Handler = () => ({ body: { ready: true } });

before(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const entry: Seen = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: raw ? JSON.parse(raw) : undefined };
      const probe = entry.url === "/readyz";
      (probe ? probes : seen).push(entry);
      const out = (probe ? ready : respond)(entry);
      setTimeout(() => {
        res.writeHead(out.status ?? 200, { "content-type": "application/json" });
        res.end(JSON.stringify(out.body ?? {}));
      }, out.delayMs ?? 0);
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

beforeEach(() => {
  seen = [];
  respond = () => ({ body: {} });
  probes = [];
  ready = () => ({ body: { ready: true } });
});

type Registered = { hooks: Map<string, { handler: Function; opts: any }[]>; commands: any[]; warnings: string[] };

function fakeApi(config: Record<string, unknown>) {
  const r: Registered = { hooks: new Map(), commands: [], warnings: [] };
  const api = {
    id: "metaclaw",
    pluginConfig: config,
    logger: { info: () => {}, warn: (m: string) => r.warnings.push(m) },
    on(name: string, handler: Function, opts: unknown) {
      r.hooks.set(name, [...(r.hooks.get(name) ?? []), { handler, opts }]);
    },
    registerCommand(def: unknown) {
      r.commands.push(def);
    },
  };
  return { api, r, hook: (name: string) => r.hooks.get(name)![0].handler };
}

const CTX = { sessionId: "s-1", sessionKey: "agent:main:explicit:s-1", runId: "run-1", agentId: "main", modelId: "scripted-model", trigger: "user" };
const TURN = [
  { role: "user", content: "earlier question" },
  { role: "assistant", content: [{ type: "text", text: "earlier answer" }] },
  { role: "user", content: [{ type: "text", text: "What time is it in Tokyo?" }] },
  { role: "assistant", content: [{ type: "text", text: "Let me check." }, { type: "toolCall", id: "call_1", name: "clock", arguments: { tz: "Asia/Tokyo" } }], stopReason: "toolUse" },
  { role: "toolResult", toolCallId: "call_1", toolName: "clock", content: [{ type: "text", text: "09:30" }], isError: false },
  { role: "custom", content: "bookkeeping" },
  { role: "assistant", content: [{ type: "text", text: "It is 09:30 in Tokyo." }], stopReason: "stop", usage: { input: 120, output: 9, totalTokens: 129 } },
];

test("the entry point names the plugin and registers idempotently", () => {
  assert.equal(plugin.id, "metaclaw");
  const { api, r } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  registerMetaClaw(api);
  assert.deepEqual([...r.hooks.keys()].sort(), ["agent_end", "before_prompt_build", "session_end"]);
  for (const regs of r.hooks.values()) assert.equal(regs.length, 1);
  assert.equal(r.commands.length, 1);
  assert.equal(r.commands[0].name, "metaclaw");
});

test("config defaults and limits", () => {
  assert.deepEqual(readConfig(undefined), { enabled: true, serviceUrl: "http://127.0.0.1:30000", token: undefined, topK: 5, injectTimeoutMs: 1500, captureTimeoutMs: 3000, readyWaitMs: 3000, mainAgentId: "main" });
  assert.equal(readConfig({ serviceUrl: "http://h:1///" }).serviceUrl, "http://h:1");
});

test("before_prompt_build injects the block and agent_end captures the turn with its call id", async () => {
  const { api, hook } = fakeApi({ serviceUrl: url, topK: 3, token: "tok" });
  registerMetaClaw(api);
  respond = (req) => (req.url === "/v1/inject" ? { body: { call_id: "call-abc", text: "<metaclaw-skills>\nX\n</metaclaw-skills>" } } : { body: { captured: true } });

  const result = await hook("before_prompt_build")({ prompt: "whole prompt", currentUserMessage: "[Mon 2026-11-30 02:55 UTC] What time is it in Tokyo?", messages: [] }, CTX);
  assert.deepEqual(result, { appendSystemContext: "<metaclaw-skills>\nX\n</metaclaw-skills>" });
  const inject = seen[0];
  assert.equal(inject.headers.authorization, "Bearer tok");
  // OpenClaw's main agent is MetaClaw's default agent: no agent named
  assert.equal(inject.headers["x-metaclaw-agent"], undefined);
  assert.deepEqual(
    { task: inject.body.task, session_id: inject.body.session_id, framework: inject.body.framework, top_k: inject.body.top_k, model: inject.body.model },
    { task: "[Mon 2026-11-30 02:55 UTC] What time is it in Tokyo?", session_id: "s-1", framework: "openclaw", top_k: 3, model: "scripted-model" },
  );

  await hook("agent_end")({ runId: "run-1", messages: TURN, success: true, durationMs: 1500 }, CTX);
  const capture = seen[1];
  assert.equal(capture.url, "/v1/trajectories");
  assert.equal(capture.headers["x-metaclaw-agent"], undefined);
  assert.equal(capture.body.call_id, "call-abc");
  assert.equal(capture.body.session_id, "s-1");
  assert.equal(capture.body.success, true);
  assert.equal(capture.body.latency_ms, 1500);
  assert.deepEqual(capture.body.messages, [
    { role: "user", content: "What time is it in Tokyo?" },
    { role: "assistant", content: "Let me check.", tool_calls: [{ id: "call_1", name: "clock", arguments: '{"tz":"Asia/Tokyo"}' }] },
    { role: "tool", content: "09:30", tool_call_id: "call_1", name: "clock" },
  ]);
  assert.deepEqual(capture.body.output, { text: "It is 09:30 in Tokyo.", tool_calls: [], finish_reason: "stop", usage: { prompt_tokens: 120, completion_tokens: 9, total_tokens: 129 } });
});

test("an empty request, an empty block and a disabled plugin inject nothing", async () => {
  const { api, hook } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  respond = () => ({ body: { call_id: "c", text: "" } });
  assert.equal(await hook("before_prompt_build")({ prompt: "history", currentUserMessage: "", messages: [] }, CTX), undefined);
  assert.equal(seen.length, 0);
  assert.equal(await hook("before_prompt_build")({ prompt: "hello", messages: [] }, CTX), undefined);
  assert.equal(seen.length, 1);

  const off = fakeApi({ serviceUrl: url, enabled: false });
  registerMetaClaw(off.api);
  assert.equal(await off.hook("before_prompt_build")({ prompt: "hello", messages: [] }, CTX), undefined);
  await off.hook("agent_end")({ messages: TURN, success: true }, CTX);
  assert.equal(seen.length, 1);
});

test("a service that is down or slow costs the turn at most the time-out", async () => {
  const down = fakeApi({ serviceUrl: "http://127.0.0.1:9", injectTimeoutMs: 300 });
  registerMetaClaw(down.api);
  let t0 = Date.now();
  assert.equal(await down.hook("before_prompt_build")({ prompt: "hi", messages: [] }, CTX), undefined);
  await down.hook("agent_end")({ messages: TURN, success: true }, CTX);
  await down.hook("before_prompt_build")({ prompt: "hi again", messages: [] }, CTX);
  assert.ok(Date.now() - t0 < 2000);
  assert.equal(down.r.warnings.filter((w) => w.includes("skill injection")).length, 1); // rate-limited
  assert.match(down.r.warnings.join("\n"), /turn goes on without it/);

  const slow = fakeApi({ serviceUrl: url, injectTimeoutMs: 200 });
  registerMetaClaw(slow.api);
  respond = () => ({ body: { call_id: "c", text: "late" }, delayMs: 1500 });
  t0 = Date.now();
  assert.equal(await slow.hook("before_prompt_build")({ prompt: "hi", messages: [] }, CTX), undefined);
  assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
  assert.equal(slow.r.hooks.get("before_prompt_build")![0].opts.timeoutMs, 3450);
});

test("the first turn waits while the service is loading (/readyz 503), then gets skills", async () => {
  const { api, hook } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  ready = () => (probes.length < 3 ? { status: 503, body: { ready: false, waiting_for: ["embedder"] } } : { body: { ready: true } });
  respond = () => ({ body: { call_id: "c", text: "BLOCK" } });
  const first = await hook("before_prompt_build")({ prompt: "hi", messages: [] }, CTX);
  assert.deepEqual(first, { appendSystemContext: "BLOCK" });
  assert.equal(probes.length, 3); // 503, 503, 200: then the injection
  assert.deepEqual(seen.map((s) => s.url), ["/v1/inject"]);
  await hook("before_prompt_build")({ prompt: "hi again", messages: [] }, CTX);
  assert.equal(probes.length, 3); // later turns do not ask again
  assert.equal(seen.length, 2);
});

test("a service that stays not ready costs the first turn at most readyWaitMs; a down one nothing", async () => {
  const { api, hook } = fakeApi({ serviceUrl: url, readyWaitMs: 300 });
  registerMetaClaw(api);
  ready = () => ({ status: 503, body: { ready: false } });
  respond = () => ({ body: { call_id: "c", text: "" } });
  let t0 = Date.now();
  assert.equal(await hook("before_prompt_build")({ prompt: "hi", messages: [] }, CTX), undefined);
  const waited = Date.now() - t0;
  assert.ok(waited < 1500, `waited ${waited} ms`);
  assert.ok(probes.length >= 2);
  assert.deepEqual(seen.map((s) => s.url), ["/v1/inject"]); // injected anyway (fail-open)

  const down = new MetaClawClient(readConfig({ serviceUrl: "http://127.0.0.1:9" }));
  t0 = Date.now();
  assert.equal(await down.waitReady(3000), false);
  assert.ok(Date.now() - t0 < 1000, "a refused connection is not waited on");
  const old = new MetaClawClient(readConfig({ serviceUrl: url }));
  ready = () => ({ status: 404, body: {} }); // a service from before /readyz
  assert.equal(await old.waitReady(3000), true);
});

test("session_end ends the session; service errors are swallowed", async () => {
  const { api, hook, r } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  await hook("session_end")({ sessionId: "s/1", reason: "idle", messageCount: 4 }, { sessionId: "s/1" });
  assert.equal(seen[0].url, "/v1/sessions/s%2F1/end");
  assert.deepEqual(seen[0].body, { reason: "idle", message_count: 4 });
  respond = () => ({ status: 500, body: { error: { message: "store down" } } });
  await hook("session_end")({ sessionId: "s2", messageCount: 1 }, {});
  assert.match(r.warnings.join("\n"), /store down/);
});

test("/metaclaw shows status and records explicit feedback", async () => {
  const client = new MetaClawClient(readConfig({ serviceUrl: url }));
  respond = (req) =>
    req.url === "/v1/status"
      ? { body: { engine: { live_skills: 7, generation: 3, trajectories: 42, embedder_ready: true } } }
      : { body: { trajectory_id: "t-9", reward: 1 } };
  assert.match(await metaclawCommand(client, "", "s-1"), /7 live, generation 3/);
  assert.match(await metaclawCommand(client, "good  clear answer", "s-1"), /\+1 .*t-9/);
  assert.deepEqual(seen.at(-1)!.body, { session_id: "s-1", reward: 1, source: "openclaw-user", detail: "clear answer" });
  await metaclawCommand(client, "bad", "s-1");
  assert.equal(seen.at(-1)!.body.reward, -1);
  assert.match(await metaclawCommand(client, "frobnicate", "s-1"), /Usage/);
  assert.match(await metaclawCommand(client, "good", undefined), /no session/);
  const down = new MetaClawClient(readConfig({ serviceUrl: "http://127.0.0.1:9" }));
  assert.match(await metaclawCommand(down, "status", "s-1"), /unreachable/);

  const { api, r } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  const reply = await r.commands[0].handler({ args: "status", sessionId: "s-1", channel: "cli", isAuthorizedSender: true, commandBody: "/metaclaw status", config: {} });
  assert.match(reply.text, /generation 3/);
});

test("huge contents and errors are cut before they are sent", async () => {
  const { api, hook } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  const huge = "x".repeat(200_000);
  await hook("agent_end")({ messages: [{ role: "user", content: huge }, { role: "toolResult", toolCallId: "c", content: huge }], success: false, error: huge }, CTX);
  const body = seen[0].body;
  assert.ok(body.messages[0].content.length < 50_100 && body.messages[0].content.endsWith("chars]"));
  assert.ok(body.messages[1].content.length < 50_100);
  assert.ok(body.error.length < 4_100);
  assert.equal(body.success, false);
});

test("turnCapture without a final answer keeps every message", () => {
  const t = turnCapture([{ role: "user", content: "only a question" }]);
  assert.deepEqual(t, { messages: [{ role: "user", content: "only a question" }] });
});

test("the recent user messages go with the task: the service extracts the query", async () => {
  const resume = "[Mon 2026-11-30 10:55 UTC] Continue the current task from the existing transcript, preserving completed work.";
  const history = [
    { role: "user", content: [{ type: "text", text: "Rename the report to the P2 convention" }] },
    { role: "assistant", content: [{ type: "text", text: "" }] },
    { role: "user", content: "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstate" },
  ];
  assert.deepEqual(recentUserMessages(history), [
    { role: "user", content: "Rename the report to the P2 convention" },
    { role: "user", content: "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstate" },
  ]);
  assert.deepEqual(recentUserMessages(undefined), []);
  const many = Array.from({ length: 20 }, (_, i) => ({ role: "user", content: `task ${i}` }));
  assert.deepEqual(recentUserMessages(many).map((m) => m.content), Array.from({ length: 8 }, (_, i) => `task ${i + 12}`));

  const { api, hook } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  respond = () => ({ body: { call_id: "c-2", text: "" } });
  await hook("before_prompt_build")({ prompt: resume, currentUserMessage: resume, messages: history }, CTX);
  assert.equal(seen[0].body.task, resume);
  assert.equal(seen[0].body.messages[0].content, "Rename the report to the P2 convention");
});

test("OpenClaw's agentId becomes a MetaClaw agent id; none names no agent", async () => {
  assert.equal(agentOf({ agentId: "main" }), undefined); // OpenClaw's main agent: the default
  assert.equal(agentOf({ agentId: "main" }, "boss"), "main");
  assert.equal(agentOf({ agentId: "Boss" }, "boss"), undefined);
  assert.equal(agentOf({ agentId: "Support Bot/EU" }), "support-bot-eu");
  assert.equal(agentOf({ agentId: "__x" }), "x");
  assert.equal(agentOf({ agentId: "a".repeat(80) })?.length, 64);
  assert.equal(agentOf({}), undefined);
  assert.equal(agentOf({ agentId: "***" }), undefined);
  const { api, hook } = fakeApi({ serviceUrl: url });
  registerMetaClaw(api);
  respond = () => ({ body: { call_id: "c", text: "" } });
  await hook("before_prompt_build")({ prompt: "hello", messages: [] }, { ...CTX, agentId: undefined });
  assert.equal(seen[0].headers["x-metaclaw-agent"], undefined);
  await hook("before_prompt_build")({ prompt: "hello", messages: [] }, { ...CTX, agentId: "Coder" });
  assert.equal(seen[1].headers["x-metaclaw-agent"], "coder");
  await hook("agent_end")({ runId: "run-1", messages: TURN, success: true }, { ...CTX, agentId: "Coder" });
  assert.equal(seen[2].url, "/v1/trajectories");
  assert.equal(seen[2].headers["x-metaclaw-agent"], "coder");
});
