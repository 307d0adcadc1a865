// The MetaClaw dashboard: polls the service's JSON routes and renders them.
// Every value from the service (skills, trajectories, reasons) is untrusted text: it only ever
// reaches the page through textContent / text nodes, never through innerHTML.
"use strict";

(() => {
  const TOKEN_KEY = "metaclaw.token";
  const AGENT_KEY = "metaclaw.agent"; // the agent picked in this tab (none: the service's)
  const POLL_MS = 2000;
  const TRAINING_EVERY = 5; // polls between training refreshes when nothing else changed
  const TRAJECTORIES_SHOWN = 25;
  const SVG_NS = "http://www.w3.org/2000/svg";

  const state = {
    fingerprint: null,
    polls: 0,
    timer: null,
    running: false,
    epoch: 0, // bumped by every restart, so a poll in flight from before does not reschedule
    generation: null,
    skills: [],
    agents: null, // the picker's options as last loaded (JSON), to redraw only on change
  };

  class AuthError extends Error {}

  // -- DOM helpers -------------------------------------------------------------------------
  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "data") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  const chip = (text, cls) => el("span", { class: "chip " + (cls || ""), text });
  const empty = (text) => el("p", { class: "empty", text });

  function fmtReward(value) {
    if (value === null || value === undefined) return el("span", { class: "muted", text: "–" });
    const cls = value > 0 ? "reward-pos" : value < 0 ? "reward-neg" : "";
    return el("span", { class: cls, text: (value > 0 ? "+" : "") + value.toFixed(2) });
  }

  function fmtTime(iso) {
    if (!iso) return "–";
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
  }

  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1024 / 1024).toFixed(1) + " MiB";
  }

  function fmtDuration(s) {
    if (s < 120) return Math.round(s) + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  const shorten = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

  // -- the API -----------------------------------------------------------------------------
  async function api(path, options) {
    const opts = options || {};
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const agent = sessionStorage.getItem(AGENT_KEY);
    if (agent) headers["X-MetaClaw-Agent"] = agent;
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method: opts.method || "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) {
      throw new AuthError(token ? "the token was refused" : "this service needs its token");
    }
    if (response.status === 403 && agent) {
      sessionStorage.removeItem(AGENT_KEY); // not this token's agent: back to its own
      state.agents = null;
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const message = data && data.error && data.error.message;
      throw new Error(message || `HTTP ${response.status} from ${path}`);
    }
    return data;
  }

  // -- connection and auth -----------------------------------------------------------------
  function setLive(kind, text) {
    const node = $("live-state");
    node.dataset.state = kind;
    node.textContent = text;
  }

  function showAuth(message) {
    stopPolling();
    $("app").hidden = true;
    $("auth").hidden = false;
    $("token-forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
    const error = $("auth-error");
    error.hidden = !message;
    error.textContent = message || "";
    setLive("error", "token needed");
    $("token-input").focus();
  }

  function showApp() {
    $("auth").hidden = true;
    $("app").hidden = false;
    $("token-forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
  }

  function notice(message) {
    const node = $("notice");
    node.hidden = !message;
    node.textContent = message || "";
  }

  function connect() {
    const token = $("token-input").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token-input").value = "";
    refreshNow();
  }

  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(AGENT_KEY);
    state.agents = null;
    state.fingerprint = null;
    showAuth("");
  }

  // -- polling -----------------------------------------------------------------------------
  function stopPolling() {
    state.running = false;
    if (state.timer !== null) clearTimeout(state.timer);
    state.timer = null;
  }

  function refreshNow() {
    stopPolling();
    state.fingerprint = null;
    state.running = true;
    state.epoch += 1;
    poll(state.epoch);
  }

  async function poll(epoch) {
    if (epoch !== state.epoch) return;
    state.timer = null;
    try {
      const summary = await api("/v1/dashboard/summary");
      showApp();
      renderSummary(summary);
      if (state.agents === null || state.polls % TRAINING_EVERY === 0) await loadAgents();
      const fingerprint = JSON.stringify([
        summary.generation,
        summary.live_skills,
        summary.pending,
        summary.trajectories,
        summary.rewards,
      ]);
      const loads = [];
      const changed = fingerprint !== state.fingerprint;
      if (changed) {
        loads.push(loadSkills(), loadCandidates(), loadGenerations(), loadTrajectories());
        loads.push(loadEvidence());
      }
      if (changed || state.polls % TRAINING_EVERY === 0) loads.push(loadTraining());
      await Promise.all(loads);
      if (epoch !== state.epoch) return;
      state.fingerprint = fingerprint;
      setLive("live", "live · updated " + new Date().toLocaleTimeString());
    } catch (err) {
      if (epoch !== state.epoch) return;
      if (err instanceof AuthError) {
        showAuth(sessionStorage.getItem(TOKEN_KEY) ? err.message : "");
        return;
      }
      setLive("error", "error: " + err.message);
    }
    state.polls += 1;
    if (state.running && !document.hidden) state.timer = setTimeout(() => poll(epoch), POLL_MS);
  }

  // A hidden tab stops polling; showing it again starts at once.
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.running && state.timer === null) refreshNow();
  });

  async function act(button, work) {
    button.disabled = true;
    notice("");
    try {
      await work();
    } catch (err) {
      if (err instanceof AuthError) {
        showAuth(err.message);
        return;
      }
      notice(err.message);
    } finally {
      button.disabled = false;
    }
    refreshNow();
  }

  // -- the agent picker --------------------------------------------------------------------
  async function loadAgents() {
    const data = await api("/v1/dashboard/agents");
    const key = JSON.stringify(data);
    if (key === state.agents) return;
    state.agents = key;
    const select = $("agent-select");
    select.replaceChildren(
      ...data.agents.map((a) =>
        el("option", { value: a.agent, text: `${a.agent} · generation ${a.generation} · ${a.live_skills} own, ${a.received} shared` }),
      ),
    );
    select.value = data.agent;
    $("agent-pick").hidden = data.agents.length < 2;
  }

  function pickAgent() {
    const agent = $("agent-select").value;
    sessionStorage.setItem(AGENT_KEY, agent);
    state.agents = null;
    refreshNow();
  }

  // -- summary and health ------------------------------------------------------------------
  function kv(key, value, cls) {
    return el("div", null, el("span", { class: "k", text: key }), el("span", { class: "v " + (cls || ""), text: value }));
  }

  function renderSummary(s) {
    state.generation = s.generation;
    $("generation-badge").textContent = "generation " + s.generation;
    const h = s.health;
    $("health-kv").replaceChildren(
      kv("generation", String(s.generation)),
      kv("live skills", String(s.live_skills)),
      kv("pending review", String(s.pending), s.pending ? "bad" : ""),
      kv("trajectories", s.trajectories === null ? "?" : String(s.trajectories)),
      kv("rewards", String(s.rewards)),
      kv("embedder", h.embedder_ready ? "ready" : "loading", h.embedder_ready ? "good" : "bad"),
      kv("capture queue", String(h.queue_depth)),
      kv("spool", `${h.spool_pending} pending · ${fmtBytes(h.spool_bytes)}`),
      kv("store", h.store_healthy ? "healthy" : h.capture_enabled ? "unhealthy" : "capture off", h.store_healthy ? "good" : "bad"),
      kv("role", h.role),
      kv("uptime", fmtDuration(s.service.uptime_s)),
      kv("token", s.service.auth ? "required" : "off"),
    );
    const faults = Object.entries(h.faults || {});
    const box = $("health-faults");
    if (!faults.length && !h.last_error && !h.store_error) {
      box.replaceChildren(el("p", { class: "muted", text: "No faults: nothing failed open." }));
      return;
    }
    box.replaceChildren(
      el("h3", { text: "Faults (the engine failed open)" }),
      faults.length
        ? el("table", null, el("tbody", null, faults.map(([where, n]) => el("tr", null, el("td", { text: where }), el("td", { text: String(n) })))))
        : null,
      h.last_error ? el("p", { class: "error" }, "last error: ", h.last_error) : null,
      h.store_error ? el("p", { class: "error" }, "store: ", h.store_error) : null,
    );
  }

  // -- skills ------------------------------------------------------------------------------
  async function loadSkills() {
    const data = await api("/v1/dashboard/skills");
    state.skills = data.skills;
    renderSkills();
  }

  function skillMatches(skill, query) {
    if (!query) return true;
    const hay = [skill.name, skill.description, skill.body, skill.category || "", skill.source]
      .join("\n")
      .toLowerCase();
    return query
      .toLowerCase()
      .split(/\s+/)
      .filter(Boolean)
      .every((word) => hay.includes(word));
  }

  function renderStats(stats) {
    if (!stats) return el("div", { class: "stats", text: "no statistics yet" });
    const num = (v) => (v === null || v === undefined ? "–" : (v > 0 ? "+" : "") + v.toFixed(2));
    return el(
      "div",
      { class: "stats" },
      el("span", null, "injected ", el("b", { text: String(stats.injected) })),
      el("span", null, "reward with ", el("b", { text: num(stats.mean_with) }), ` (n=${stats.rewarded_with})`),
      el("span", null, "without ", el("b", { text: num(stats.mean_without) }), ` (n=${stats.comparable_without})`),
      el("span", null, "gain ", el("b", { text: num(stats.gain) })),
      el("span", { text: stats.verdict }),
    );
  }

  function renderProvenance(p) {
    const lines = [];
    if (p.generation_added !== null && p.generation_added !== undefined) {
      lines.push(el("div", null, `added in generation ${p.generation_added}`, p.generation_reason ? ": " : "", p.generation_reason || ""));
    }
    const e = p.evolution;
    if (e) {
      lines.push(
        el("div", null, `from the ${e.mode} evolver (trigger: `, e.trigger, `) over ${e.failures} failure(s)`, e.model ? " · model " : "", e.model || ""),
      );
      if (e.reasons && e.reasons.length) lines.push(el("div", { class: "muted" }, "notes: ", e.reasons.join("; ")));
    } else {
      lines.push(el("div", null, "source: ", p.source));
    }
    if (p.trajectory_count) {
      const items = p.trajectories.map((t) =>
        t.missing
          ? el("li", { class: "muted", text: `${t.id} (no longer in the store)` })
          : el(
              "li",
              null,
              el("span", { class: "mono", text: t.id.slice(0, 8) }),
              " ",
              shorten(t.query || "(no task text)", 140),
              t.error ? el("span", { class: "reward-neg" }, " · error: ", shorten(t.error, 80)) : null,
              " · reward ",
              fmtReward(t.reward),
            ),
      );
      lines.push(el("div", null, `learned from ${p.trajectory_count} trajectory(ies):`));
      lines.push(el("ul", null, items));
    }
    return el("div", { class: "prov" }, lines);
  }

  function skillCard(skill) {
    return el(
      "article",
      { class: "card skill", data: { skill: skill.name } },
      el(
        "div",
        { class: "card-head" },
        el("span", { class: "name", text: skill.name }),
        skill.category ? chip(skill.category) : null,
        chip(skill.source, "source-" + skill.source),
        skill.generation_added !== null ? chip("g" + skill.generation_added) : null,
      ),
      el("p", { class: "description", text: skill.description }),
      renderStats(skill.stats),
      el("details", null, el("summary", { text: "instructions" }), el("pre", { text: skill.body })),
      el("details", null, el("summary", { text: "provenance" }), renderProvenance(skill.provenance)),
    );
  }

  function renderSkills() {
    const query = $("skill-search").value.trim();
    const shown = state.skills.filter((s) => skillMatches(s, query));
    $("skill-count").textContent = query
      ? `${shown.length} of ${state.skills.length}`
      : `${state.skills.length} live`;
    $("skill-list").replaceChildren(
      ...(shown.length
        ? shown.map(skillCard)
        : [empty(state.skills.length ? "No live skill matches the search." : "No live skills yet.")]),
    );
  }

  // -- review ------------------------------------------------------------------------------
  async function loadCandidates() {
    const data = await api("/v1/dashboard/candidates");
    const list = data.candidates;
    $("pending-count").textContent = list.length ? `${list.length} waiting` : "";
    $("pending-list").replaceChildren(
      ...(list.length ? list.map(candidateCard) : [empty("Nothing waits for review.")]),
    );
  }

  function candidateCard(c) {
    const path = "/v1/dashboard/candidates/" + encodeURIComponent(c.name);
    const approve = el("button", { type: "button", class: "approve", text: "Approve" });
    const reject = el("button", { type: "button", class: "reject secondary", text: "Reject" });
    approve.addEventListener("click", () => act(approve, () => api(path + "/approve", { method: "POST", body: {} })));
    reject.addEventListener("click", () => act(reject, () => api(path + "/reject", { method: "POST", body: {} })));
    return el(
      "article",
      { class: "card candidate", data: { candidate: c.name } },
      el(
        "div",
        { class: "card-head" },
        el("span", { class: "name", text: c.name }),
        c.updates ? chip("updates " + c.updates, "updated") : chip("new", "added"),
        chip(c.source, "source-" + c.source),
      ),
      el("p", { class: "description", text: c.description }),
      ...(c.findings && c.findings.length
        ? [el(
            "ul",
            { class: "findings" },
            ...c.findings.map((f) =>
              el("li", {
                class: "finding " + f.outcome,
                text: `held: ${f.category || f.check}: ${f.reason}` +
                  (f.score != null ? ` (${f.score.toFixed(2)})` : "") +
                  (f.sentence ? ` — “${f.sentence}”` : ""),
              }),
            ),
          )]
        : []),
      el("details", { open: true }, el("summary", { text: "instructions" }), el("pre", { text: c.body })),
      el("details", null, el("summary", { text: "provenance" }), renderProvenance(c.provenance)),
      el("div", { class: "actions" }, approve, reject),
    );
  }

  // -- generations -------------------------------------------------------------------------
  async function loadGenerations() {
    const history = await api("/v1/generations");
    const current = history.length ? history[history.length - 1].number : 0;
    const items = history
      .slice()
      .reverse()
      .map((g) => generationItem(g, current));
    $("timeline").replaceChildren(...(items.length ? items : [el("li", null, empty("No generations yet."))]));
  }

  function rollbackControls(g) {
    const box = el("div", { class: "actions" });
    const start = el("button", { type: "button", class: "rollback secondary", text: `Roll back to g${g.number}` });
    start.addEventListener("click", () => {
      const confirm = el("button", { type: "button", class: "rollback-confirm danger", text: `Confirm rollback to g${g.number}` });
      const cancel = el("button", { type: "button", class: "secondary", text: "Cancel" });
      confirm.addEventListener("click", () =>
        act(confirm, () => api("/v1/dashboard/rollback", { method: "POST", body: { generation: g.number } })),
      );
      cancel.addEventListener("click", () => box.replaceChildren(start));
      box.replaceChildren(confirm, cancel);
    });
    box.append(start);
    return box;
  }

  function generationItem(g, current) {
    const diff = [
      ...g.added.map((n) => chip("+ " + n, "added")),
      ...g.retired.map((n) => chip("− " + n, "retired")),
      ...g.updated.map((n) => chip("~ " + n, "updated")),
    ];
    return el(
      "li",
      { class: g.number === current ? "current" : "", data: { generation: String(g.number) } },
      el("div", null, el("b", { text: "g" + g.number }), el("span", { class: "when", text: fmtTime(g.created_at) }), g.number === current ? chip("live", "added") : null),
      el("div", { class: "reason", text: g.reason || "(no reason given)" }),
      el("div", { class: "diff" }, diff.length ? diff : chip("no change")),
      g.number < current ? rollbackControls(g) : null,
    );
  }

  // -- trajectories ------------------------------------------------------------------------
  // -- evidence: replays, holdout, learning curve -------------------------------------------
  const fmtSigned = (v) => (v === null || v === undefined ? "–" : (v > 0 ? "+" : "") + v.toFixed(2));

  async function loadEvidence() {
    const [evidence, curve] = await Promise.all([api("/v1/skills/evidence"), api("/v1/report")]);
    $("evidence-rows").replaceChildren(
      ...(evidence.skills.length
        ? evidence.skills.map(evidenceRow)
        : [el("tr", null, el("td", { colspan: 9, class: "empty", text: "No evidence recorded yet." }))]),
    );
    $("curve-rows").replaceChildren(
      ...curve.generations.map((g) =>
        el(
          "tr",
          { class: "curve", data: { generation: String(g.generation) } },
          el("td", { text: g.generation }),
          el("td", { text: g.calls }),
          el("td", { text: g.scored }),
          el("td", null, fmtReward(g.mean_reward)),
          el("td", { text: g.failure_rate === null ? "–" : Math.round(g.failure_rate * 100) + " %" }),
        ),
      ),
    );
  }

  function evidenceRow(r) {
    const rp = r.replays;
    const h = r.holdout || {};
    const interval = h.low === null || h.low === undefined
      ? fmtSigned(h.lift)
      : `${fmtSigned(h.lift)} [${fmtSigned(h.low)}, ${fmtSigned(h.high)}]`;
    return el(
      "tr",
      { class: "evidence", data: { skill: r.skill } },
      el("td", { class: "name", text: r.skill }),
      el("td", { text: r.live ? "yes" : "no" }),
      el("td", { text: rp.total ? `${rp.fixed} of ${rp.fixed + rp["not-fixed"]}` : "not validated" }),
      el("td", { text: rp.regressed }),
      el("td", { text: rp.error + rp.unscored }),
      el("td", null, h.state ? chip(h.state, "holdout-" + h.state) : el("span", { class: "muted", text: "–" })),
      el("td", { text: h.state ? `${h.injected ?? 0} / ${h.held_out ?? 0}` : "–" }),
      el("td", { text: h.state ? interval : "–" }),
      el("td", { class: "muted", text: h.reason || "" }),
    );
  }

  async function loadTrajectories() {
    const rows = await api("/v1/trajectories?limit=" + TRAJECTORIES_SHOWN);
    $("trajectory-rows").replaceChildren(
      ...(rows.length
        ? rows.map(trajectoryRow)
        : [el("tr", null, el("td", { colspan: 7 }, empty("No trajectories captured yet.")))]),
    );
  }

  function meanReward(t) {
    if (!t.rewards || !t.rewards.length) return null;
    return t.rewards.reduce((sum, r) => sum + r.value, 0) / t.rewards.length;
  }

  function trajectoryRow(t) {
    const answer = t.output && t.output.text ? t.output.text : "";
    return el(
      "tr",
      { class: "trajectory", data: { trajectory: t.id } },
      el("td", { text: fmtTime(t.created_at) }),
      el("td", { class: "mono", text: t.session_id || "–" }),
      el(
        "td",
        { class: "task", title: t.query || "" },
        el("div", { class: "query", text: shorten(t.query || "(no task text)", 200) }),
        answer ? el("div", { class: "answer", text: "→ " + shorten(answer, 160) }) : null,
      ),
      el("td", null, t.injected_skills.length ? t.injected_skills.map((n) => chip(n)) : el("span", { class: "muted", text: "none" })),
      el("td", null, fmtReward(meanReward(t)), t.rewards && t.rewards.length > 1 ? el("span", { class: "muted", text: ` (${t.rewards.length})` }) : null),
      el("td", { class: t.error ? "reward-neg" : "", title: t.error || "", text: t.error ? "error" : t.outcome }),
      el("td", { text: String(t.generation) }),
    );
  }

  // -- training ----------------------------------------------------------------------------
  async function loadTraining() {
    const data = await api("/v1/dashboard/training");
    renderTraining(data);
  }

  function lineChart(points, label) {
    const W = 360, H = 160, P = 28;
    const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
    chart.append(svg("line", { class: "axis", x1: P, y1: H / 2, x2: W - 8, y2: H / 2 }));
    chart.append(svg("text", { x: 4, y: 14 }, "+1"), svg("text", { x: 4, y: H / 2 + 4 }, "0"), svg("text", { x: 4, y: H - 6 }, "−1"));
    if (!points.length) {
      chart.append(svg("text", { x: W / 2 - 40, y: H / 2 - 10 }, "no data yet"));
      return chart;
    }
    const xs = points.map((p) => p.x);
    const lo = Math.min(...xs), hi = Math.max(...xs);
    const x = (v) => P + (hi === lo ? (W - P - 8) / 2 : ((v - lo) / (hi - lo)) * (W - P - 16));
    const y = (v) => H / 2 - Math.max(-1, Math.min(1, v)) * (H / 2 - 12);
    chart.append(svg("polyline", { class: "line", points: points.map((p) => `${x(p.x)},${y(p.y)}`).join(" ") }));
    for (const p of points) {
      const dot = svg("circle", { class: "dot", cx: x(p.x), cy: y(p.y), r: 3 });
      dot.append(svg("title", {}, `${p.label}: ${p.y.toFixed(3)}`));
      chart.append(dot);
    }
    chart.append(svg("text", { x: P, y: H - 6 }, String(lo)), svg("text", { x: W - 30, y: H - 6 }, String(hi)));
    return chart;
  }

  function barChart(bars, label) {
    const W = 360, H = 160, P = 28;
    const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
    chart.append(svg("line", { class: "axis", x1: P, y1: H / 2, x2: W - 8, y2: H / 2 }));
    chart.append(svg("text", { x: 4, y: 14 }, "+1"), svg("text", { x: 4, y: H / 2 + 4 }, "0"), svg("text", { x: 4, y: H - 6 }, "−1"));
    if (!bars.length) {
      chart.append(svg("text", { x: W / 2 - 40, y: H / 2 - 10 }, "no data yet"));
      return chart;
    }
    const slot = (W - P - 8) / bars.length;
    const width = Math.max(4, Math.min(36, slot * 0.7));
    bars.forEach((b, i) => {
      const v = Math.max(-1, Math.min(1, b.value));
      const h = Math.abs(v) * (H / 2 - 14);
      const cx = P + slot * i + slot / 2;
      const rect = svg("rect", { class: v >= 0 ? "bar-pos" : "bar-neg", x: cx - width / 2, y: v >= 0 ? H / 2 - h : H / 2, width, height: Math.max(h, 1) });
      rect.append(svg("title", {}, `${b.label}: ${b.value.toFixed(3)} (n=${b.n})`));
      chart.append(rect);
      if (bars.length <= 16) {
        chart.append(svg("text", { x: cx - 8, y: H - 4 }, b.label));
        const vy = v >= 0 ? H / 2 - h - 4 : H / 2 + h + 11;
        chart.append(svg("text", { class: "value", x: cx - 12, y: vy }, (b.value > 0 ? "+" : "") + b.value.toFixed(2)));
      }
    });
    return chart;
  }

  function renderTraining(t) {
    const parts = [];
    const trainer = t.trainer;
    const head = el("div", null);
    if (!t.running) {
      head.append(el("span", { class: "status-off", text: "not running" }), el("span", { class: "muted", text: " — no trainer in this service (set train.enabled, or run `metaclaw train`)" }));
    } else {
      head.append(el("span", { class: "status-on", text: "running" }));
      if (trainer && trainer.backend) head.append(` · ${trainer.backend} · `, trainer.model || "", ` · step ${trainer.step}`);
      if (trainer && trainer.error) head.append(el("div", { class: "error" }, "last error: ", trainer.error));
    }
    parts.push(head);

    const b = t.buffer || {};
    const win = trainer && trainer.window;
    const policy = trainer && trainer.policy;
    const cp = t.last_checkpoint;
    parts.push(
      el(
        "div",
        { class: "kv" },
        kv("query buffer", String(b.query ?? "–")),
        kv("rewarded in buffer", String(b.rewarded_query ?? "–")),
        kv("consumed", String(b.consumed ?? "–")),
        kv("unusable", String(b.unusable ?? "–")),
        kv("support set", String(b.support ?? "–")),
        kv("window", win ? (win.open ? "open" : "closed") : "–", win && win.open ? "good" : ""),
        kv("served policy", policy ? policy.weights : "–"),
        kv("last checkpoint", cp ? `step ${cp.step} (${cp.kind})` : "none"),
      ),
    );
    if (win && win.reason) parts.push(el("p", { class: "muted" }, "scheduler: ", win.reason));
    if (t.signals && t.signals.length) {
      parts.push(
        el("ul", { class: "muted" }, t.signals.map((s) => el("li", null, `${s.signal} (${s.kind}): ${s.state}`, s.reason ? " — " : "", s.reason || ""))),
      );
    }
    if (cp) parts.push(el("p", { class: "muted" }, `last checkpoint ${cp.name}: ${cp.path} at ${fmtTime(cp.created_at)}`, cp.reward !== null ? ` · reward ${cp.reward.toFixed(3)}` : ""));
    parts.push(
      el(
        "div",
        { class: "training-grid" },
        el(
          "div",
          null,
          el("h3", { text: "GRPO reward by step" }),
          lineChart(t.reward_curve.map((p) => ({ x: p.step, y: p.reward, label: `step ${p.step}` })), "GRPO mean reward by training step"),
        ),
        el(
          "div",
          null,
          el("h3", { text: "Agent reward by generation" }),
          barChart(t.generation_rewards.map((g) => ({ label: "g" + g.generation, value: g.mean_reward, n: g.n })), "mean trajectory reward per skill generation"),
        ),
      ),
    );
    $("training-body").replaceChildren(...parts);
  }

  // -- start -------------------------------------------------------------------------------
  function start() {
    $("skill-search").addEventListener("input", renderSkills);
    $("token-submit").addEventListener("click", connect);
    $("token-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter") connect();
    });
    $("token-forget").addEventListener("click", forgetToken);
    $("agent-select").addEventListener("change", pickAgent);
    if (document.body.dataset.auth === "required" && !sessionStorage.getItem(TOKEN_KEY)) {
      showAuth("");
      return;
    }
    refreshNow();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
