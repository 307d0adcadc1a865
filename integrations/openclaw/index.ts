// MetaClaw for OpenClaw: a thin translation between OpenClaw's plugin hooks and `metaclaw serve`.
//
//   before_prompt_build -> POST /v1/inject         -> { appendSystemContext: block }
//   agent_end           -> POST /v1/trajectories   (the turn, its session id and success)
//   session_end         -> POST /v1/sessions/{id}/end
//   /metaclaw           -> GET /v1/status, or POST /v1/feedback for "good" / "bad"
//
// Retrieval, storage and learning live in the service. Every call has a short time-out and
// every failure is swallowed (logged at most once a minute): a turn never waits long for
// MetaClaw and never fails because of it. The first turn first asks GET /readyz and, while the
// service answers 503 (its skill library or embedder still loading), waits up to readyWaitMs
// for a 200, so the first turn after `metaclaw serve` starts gets skills too.
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

export const PLUGIN_ID = "metaclaw";
const FRAMEWORK = "openclaw";
const MAX_PENDING_RUNS = 1000;
const MAX_TURN_MESSAGES = 200;
const WARN_INTERVAL_MS = 60_000;
// The service keeps 20k characters of a message; sending far more only risks a 413.
const MAX_CONTENT_CHARS = 50_000;
const MAX_ERROR_CHARS = 4_000;
const READY_POLL_MS = 100;
// What /v1/inject gets of the history (the task is extracted from it by the service).
const RECENT_USER_MESSAGES = 8;
const RECENT_MESSAGE_CHARS = 8_000;

function cap(text: string, limit = MAX_CONTENT_CHARS): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}…[cut ${text.length - limit} chars]`;
}

export interface MetaClawConfig {
  enabled: boolean;
  serviceUrl: string;
  token?: string;
  topK: number;
  injectTimeoutMs: number;
  captureTimeoutMs: number;
  readyWaitMs: number;
  mainAgentId: string;
}

export const DEFAULTS: MetaClawConfig = {
  enabled: true,
  serviceUrl: "http://127.0.0.1:30000",
  topK: 5,
  injectTimeoutMs: 1500,
  captureTimeoutMs: 3000,
  readyWaitMs: 3000,
  mainAgentId: "main",
};

type Json = Record<string, unknown>;
type Logger = { info?: (msg: string) => void; warn?: (msg: string) => void };

export interface ServiceMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_calls?: { id?: string; name: string; arguments: string }[];
  tool_call_id?: string;
}

export function readConfig(raw: unknown): MetaClawConfig {
  const c = (raw && typeof raw === "object" ? raw : {}) as Json;
  const int = (v: unknown, d: number) => (typeof v === "number" && Number.isFinite(v) ? Math.trunc(v) : d);
  return {
    enabled: typeof c.enabled === "boolean" ? c.enabled : DEFAULTS.enabled,
    serviceUrl: (typeof c.serviceUrl === "string" && c.serviceUrl ? c.serviceUrl : DEFAULTS.serviceUrl).replace(/\/+$/, ""),
    token: typeof c.token === "string" && c.token ? c.token : undefined,
    topK: int(c.topK, DEFAULTS.topK),
    injectTimeoutMs: int(c.injectTimeoutMs, DEFAULTS.injectTimeoutMs),
    captureTimeoutMs: int(c.captureTimeoutMs, DEFAULTS.captureTimeoutMs),
    readyWaitMs: Math.max(0, int(c.readyWaitMs, DEFAULTS.readyWaitMs)),
    mainAgentId: typeof c.mainAgentId === "string" ? c.mainAgentId.trim().toLowerCase() : DEFAULTS.mainAgentId,
  };
}

// -- OpenClaw messages -> the service's messages ----------------------------------------------

function partsText(content: unknown): string {
  if (typeof content === "string") return cap(content);
  if (!Array.isArray(content)) return "";
  const texts: string[] = [];
  for (const part of content) {
    if (typeof part === "string") texts.push(part);
    else if (part && typeof part === "object" && (part as Json).type === "text" && typeof (part as Json).text === "string") {
      texts.push((part as Json).text as string);
    }
  }
  return cap(texts.join("\n"));
}

/** The recent user messages of a turn's history, for /v1/inject: the service's query
 * extraction reads the task from them when the current message is not one (OpenClaw's continue
 * prompt after a retried model error, its internal-context messages). Only user messages are
 * read there, so only they are sent, the newest RECENT_USER_MESSAGES of them, capped. */
export function recentUserMessages(history: unknown[] | undefined): ServiceMessage[] {
  if (!Array.isArray(history)) return [];
  const out: ServiceMessage[] = [];
  for (let i = history.length - 1; i >= 0 && out.length < RECENT_USER_MESSAGES; i--) {
    const m = history[i] as Json | null;
    if (!m || typeof m !== "object" || m.role !== "user") continue;
    const text = cap(partsText(m.content), RECENT_MESSAGE_CHARS);
    if (text.trim()) out.unshift({ role: "user", content: text });
  }
  return out;
}

function toolCalls(content: unknown): ServiceMessage["tool_calls"] {
  if (!Array.isArray(content)) return [];
  const calls: NonNullable<ServiceMessage["tool_calls"]> = [];
  for (const part of content) {
    const p = part as Json;
    if (!p || typeof p !== "object" || p.type !== "toolCall") continue;
    const args = p.arguments;
    calls.push({
      id: typeof p.id === "string" ? p.id : undefined,
      name: typeof p.name === "string" ? p.name : "",
      arguments: cap(typeof args === "string" ? args : JSON.stringify(args ?? {})),
    });
  }
  return calls;
}

/** OpenClaw's transcript messages as the service's: user, assistant (text + tool calls), tool results. */
export function toServiceMessages(messages: unknown[]): ServiceMessage[] {
  const out: ServiceMessage[] = [];
  for (const raw of messages ?? []) {
    const m = raw as Json;
    if (!m || typeof m !== "object") continue;
    switch (m.role) {
      case "system":
      case "user":
        out.push({ role: m.role, content: partsText(m.content) });
        break;
      case "assistant":
        out.push({ role: "assistant", content: partsText(m.content), tool_calls: toolCalls(m.content) });
        break;
      case "toolResult":
      case "tool":
        out.push({
          role: "tool",
          content: partsText(m.content),
          tool_call_id: typeof m.toolCallId === "string" ? m.toolCallId : typeof m.tool_call_id === "string" ? m.tool_call_id : undefined,
          name: typeof m.toolName === "string" ? m.toolName : undefined,
        });
        break;
      default:
        break; // OpenClaw's own bookkeeping entries are not part of what the model saw
    }
  }
  return out;
}

/** The messages of the last turn: from its user message on (a session's history is not resent). */
export function lastTurn(messages: ServiceMessage[]): ServiceMessage[] {
  let start = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === "user") {
      start = i;
      break;
    }
  }
  return messages.slice(start).slice(-MAX_TURN_MESSAGES);
}

export interface TurnCapture {
  messages: ServiceMessage[];
  output?: { text: string; tool_calls: NonNullable<ServiceMessage["tool_calls"]>; finish_reason?: string; usage: Record<string, number> };
}

/** The last turn as a capture: what the model was given, and its final answer as the output. */
export function turnCapture(raw: unknown[]): TurnCapture {
  const messages = lastTurn(toServiceMessages(raw));
  const last = messages[messages.length - 1];
  if (!last || last.role !== "assistant") return { messages };
  const final = [...(raw ?? [])].reverse().find((m) => (m as Json)?.role === "assistant") as Json | undefined;
  const u = (final?.usage ?? {}) as Json;
  const usage: Record<string, number> = {};
  if (typeof u.input === "number") usage.prompt_tokens = u.input;
  if (typeof u.output === "number") usage.completion_tokens = u.output;
  if (typeof u.totalTokens === "number") usage.total_tokens = u.totalTokens;
  return {
    messages: messages.slice(0, -1),
    output: {
      text: last.content,
      tool_calls: last.tool_calls ?? [],
      finish_reason: typeof final?.stopReason === "string" ? final.stopReason : undefined,
      usage,
    },
  };
}

// -- the service client -------------------------------------------------------------------

export class MetaClawClient {
  readonly config: MetaClawConfig;
  private readonly logger?: Logger;
  private readonly lastWarn = new Map<string, number>();

  /** Whether the first turn's readiness wait has happened (it happens once per client). */
  readyChecked = false;

  constructor(config: MetaClawConfig, logger?: Logger) {
    this.config = config;
    this.logger = logger;
  }

  /** Wait at most budgetMs for GET /readyz to answer 200, polling while it answers 503
   * (loading). True when ready, or when the service has no /readyz (404). False at once when
   * nothing answers (the service is down: waiting would only delay the turn) or when the
   * budget runs out. Never throws. */
  async waitReady(budgetMs: number): Promise<boolean> {
    const deadline = Date.now() + budgetMs;
    for (;;) {
      const left = deadline - Date.now();
      try {
        const res = await fetch(this.config.serviceUrl + "/readyz", {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(Math.max(50, Math.min(left, 1000))),
        });
        await res.arrayBuffer();
        if (res.ok || res.status === 404) return true;
        if (res.status !== 503) return false;
      } catch {
        return false;
      }
      if (Date.now() + READY_POLL_MS >= deadline) return false;
      await new Promise((ok) => setTimeout(ok, READY_POLL_MS));
    }
  }

  warn(where: string, err: unknown): void {
    const now = Date.now();
    if (now - (this.lastWarn.get(where) ?? 0) < WARN_INTERVAL_MS) return;
    this.lastWarn.set(where, now);
    const why = err instanceof Error ? err.message : String(err);
    this.logger?.warn?.(`metaclaw: ${where} failed, the turn goes on without it: ${why}`);
  }

  async request(method: "GET" | "POST", path: string, body: unknown, timeoutMs: number, agent?: string): Promise<Json> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.config.token) headers.authorization = `Bearer ${this.config.token}`;
    if (agent) headers["x-metaclaw-agent"] = agent;
    const res = await fetch(this.config.serviceUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) {
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON: keep the text
      }
      throw new Error(`${method} ${path} answered ${res.status}: ${message}`);
    }
    return text ? (JSON.parse(text) as Json) : {};
  }
}

// -- the plugin ---------------------------------------------------------------------------

type HookCtx = { sessionId?: string; sessionKey?: string; runId?: string; agentId?: string; modelId?: string; trigger?: string; channel?: string };

/** OpenClaw's agentId as a MetaClaw agent id (1-64 of [a-z0-9._-], starting with a letter or
 * digit): lower-cased, other characters replaced by "-". Each OpenClaw agent learns for
 * itself; no agentId, or OpenClaw's main agent (config mainAgentId, "main"): the service's
 * default agent, as before agents (its skills and trajectories stay where they were). */
export function agentOf(ctx: HookCtx | undefined, mainAgentId = DEFAULTS.mainAgentId): string | undefined {
  const raw = (ctx?.agentId ?? "").trim().toLowerCase();
  if (raw === mainAgentId) return undefined;
  const id = raw.replace(/[^a-z0-9._-]/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 64);
  return id || undefined;
}

function sessionOf(ctx: HookCtx | undefined): string | undefined {
  return ctx?.sessionId ?? ctx?.sessionKey;
}

function runKey(ctx: HookCtx | undefined, runId?: string): string {
  return runId ?? ctx?.runId ?? sessionOf(ctx) ?? "default";
}

/** call ids from /v1/inject, waiting for the capture of their run (bounded: oldest dropped). */
class PendingCalls {
  private readonly calls = new Map<string, string>();

  put(key: string, callId: string): void {
    this.calls.delete(key);
    this.calls.set(key, callId);
    if (this.calls.size > MAX_PENDING_RUNS) this.calls.delete(this.calls.keys().next().value as string);
  }

  take(key: string): string | undefined {
    const id = this.calls.get(key);
    this.calls.delete(key);
    return id;
  }
}

const registered = new WeakSet<object>();
// Shared by every registration: a re-registration (config reload) mid-turn keeps the call id.
const pending = new PendingCalls();

export function registerMetaClaw(api: any): void {
  // OpenClaw may call register more than once (full and discovery registration): hooks must
  // be added to a given api once only.
  if (!api || registered.has(api)) return;
  registered.add(api);
  const config = readConfig(api.pluginConfig);
  const client = new MetaClawClient(config, api.logger);

  api.on(
    "before_prompt_build",
    async (event: { prompt?: string; currentUserMessage?: string; messages?: unknown[] }, ctx: HookCtx) => {
      if (!config.enabled) return undefined;
      // An explicit "" means the turn has no textual request: nothing to retrieve for.
      const current = event.currentUserMessage ?? event.prompt ?? "";
      if (!current.trim()) return undefined;
      // The first turn: wait (bounded) for a service still loading rather than be served
      // without skills. Fail-open: when the wait runs out the turn is injected anyway.
      if (!client.readyChecked && config.readyWaitMs > 0) {
        client.readyChecked = true;
        await client.waitReady(config.readyWaitMs);
      }
      try {
        const res = await client.request(
          "POST",
          "/v1/inject",
          {
            task: current,
            messages: recentUserMessages(event.messages),
            session_id: sessionOf(ctx),
            framework: FRAMEWORK,
            model: ctx?.modelId,
            top_k: config.topK,
            metadata: { agent_id: ctx?.agentId, run_id: ctx?.runId, trigger: ctx?.trigger, channel: ctx?.channel },
          },
          config.injectTimeoutMs,
          agentOf(ctx, config.mainAgentId),
        );
        if (typeof res.call_id === "string") pending.put(runKey(ctx), res.call_id);
        const block = typeof res.text === "string" ? res.text : "";
        return block ? { appendSystemContext: block } : undefined;
      } catch (err) {
        client.warn("skill injection", err);
        return undefined;
      }
    },
    { timeoutMs: config.readyWaitMs + config.injectTimeoutMs + 250 },
  );

  api.on(
    "agent_end",
    async (event: { runId?: string; messages?: unknown[]; success?: boolean; error?: string; durationMs?: number }, ctx: HookCtx) => {
      if (!config.enabled) return;
      const callId = pending.take(runKey(ctx, event.runId));
      try {
        await client.request(
          "POST",
          "/v1/trajectories",
          {
            call_id: callId,
            session_id: sessionOf(ctx),
            framework: FRAMEWORK,
            model: ctx?.modelId,
            ...turnCapture(event.messages ?? []),
            success: event.success ?? null,
            error: typeof event.error === "string" ? cap(event.error, MAX_ERROR_CHARS) : null,
            latency_ms: typeof event.durationMs === "number" ? event.durationMs : null,
            metadata: { agent_id: ctx?.agentId, run_id: event.runId ?? ctx?.runId, trigger: ctx?.trigger, channel: ctx?.channel },
          },
          config.captureTimeoutMs,
          agentOf(ctx, config.mainAgentId),
        );
      } catch (err) {
        client.warn("turn capture", err);
      }
    },
    { timeoutMs: config.captureTimeoutMs + 250 },
  );

  api.on(
    "session_end",
    async (event: { sessionId?: string; reason?: string; messageCount?: number }, ctx: HookCtx) => {
      if (!config.enabled) return;
      const session = event.sessionId ?? sessionOf(ctx);
      if (!session) return;
      try {
        await client.request(
          "POST",
          `/v1/sessions/${encodeURIComponent(session)}/end`,
          { reason: event.reason ?? null, message_count: typeof event.messageCount === "number" ? event.messageCount : null },
          config.captureTimeoutMs,
          agentOf(ctx, config.mainAgentId),
        );
      } catch (err) {
        client.warn("session end", err);
      }
    },
    { timeoutMs: config.captureTimeoutMs + 250 },
  );

  api.registerCommand({
    name: "metaclaw",
    description: "MetaClaw: `/metaclaw` shows status; `/metaclaw good|bad [note]` rates the last turn.",
    acceptsArgs: true,
    handler: async (ctx: { args?: string; sessionId?: string; sessionKey?: string; agentId?: string }) => ({
      text: await metaclawCommand(client, ctx.args ?? "", ctx.sessionId ?? ctx.sessionKey, agentOf(ctx, config.mainAgentId)),
    }),
  });
}

const RATINGS: Record<string, number> = { good: 1, "+": 1, up: 1, "+1": 1, bad: -1, "-": -1, down: -1, "-1": -1 };

/** The text `/metaclaw [status | good | bad [note]]` answers with. */
export async function metaclawCommand(client: MetaClawClient, args: string, session: string | undefined, agent?: string): Promise<string> {
  const [verb = "status", ...rest] = args.trim().split(/\s+/).filter(Boolean);
  const timeout = client.config.captureTimeoutMs;
  try {
    if (verb === "status") {
      const s = await client.request("GET", "/v1/status", undefined, timeout, agent);
      const e = (s.engine ?? {}) as Json;
      return [
        `MetaClaw at ${client.config.serviceUrl}${client.config.enabled ? "" : " (plugin disabled)"}`,
        `skills: ${e.live_skills ?? "?"} live, generation ${e.generation ?? "?"}`,
        `trajectories: ${e.trajectories ?? "?"}; embedder ${e.embedder_ready ? "ready" : "loading"}`,
      ].join("\n");
    }
    if (verb in RATINGS) {
      if (!session) return "MetaClaw: no session to rate here.";
      const res = await client.request(
        "POST",
        "/v1/feedback",
        { session_id: session, reward: RATINGS[verb], source: "openclaw-user", detail: rest.join(" ") || null },
        timeout,
        agent,
      );
      return `MetaClaw: recorded ${RATINGS[verb] > 0 ? "+1" : "-1"} for the last turn (${res.trajectory_id}).`;
    }
    return "Usage: /metaclaw [status] | /metaclaw good [note] | /metaclaw bad [note]";
  } catch (err) {
    return `MetaClaw service unreachable at ${client.config.serviceUrl}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export default definePluginEntry({
  id: PLUGIN_ID,
  name: "MetaClaw",
  description: "Injects learned skills into each turn and captures turns for learning, via `metaclaw serve`.",
  register: registerMetaClaw,
});
