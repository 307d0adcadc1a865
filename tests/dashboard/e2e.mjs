// Drives the dashboard in headless Debian chromium with playwright-core and records what it
// saw; tests/dashboard/test_browser.py starts the servers, runs this, and asserts on the
// results. Usage: node e2e.mjs CONFIG.json (see test_browser.py for the fields). Writes
// results.json and screenshots into config.outDir; never throws past the end (a failure is
// recorded as results.fatal).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(import.meta.url);
const { chromium } = require(cfg.playwrightCore);

// The flags the machine notes prescribe: no sandbox as root, and no background connections
// (the network is closed; chromium would otherwise retry Google's hosts).
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const results = {
  console: [], // {phase, type, text}
  pageErrors: [],
  failedRequests: [],
  httpErrors: [], // responses >= 400 {phase, url, status}
  offsite: [], // requests to anything but the servers under test
  steps: {},
  timings: {},
  screenshots: [],
};
let phase = "start";
let current = null; // the page in use, for a screenshot when something fails

function watch(page, origins) {
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") {
      results.console.push({ phase, type: m.type(), text: m.text() });
    }
  });
  page.on("pageerror", (e) => results.pageErrors.push({ phase, text: String(e) }));
  page.on("requestfailed", (r) =>
    results.failedRequests.push({ phase, url: r.url(), error: r.failure()?.errorText }),
  );
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (!["data:", "about:"].includes(url.protocol) && !origins.includes(url.origin)) {
      results.offsite.push({ phase, url: r.url() });
    }
  });
  page.on("response", (r) => {
    if (r.status() >= 400) results.httpErrors.push({ phase, url: r.url(), status: r.status() });
  });
}

const texts = (page, selector) =>
  page.$$eval(selector, (nodes) => nodes.map((n) => n.textContent.trim()));
const names = (page, selector, key) =>
  page.$$eval(selector, (nodes, k) => nodes.map((n) => n.dataset[k]), key);
const badge = (page) => page.textContent("#generation-badge");

async function waitForGeneration(page, n) {
  await page.waitForFunction(
    (want) => document.getElementById("generation-badge").textContent === `generation ${want}`,
    n,
  );
}

async function shoot(page, name) {
  const path = join(cfg.outDir, name);
  await page.screenshot({ path, fullPage: true });
  results.screenshots.push(path);
}

async function openDashboard(context) {
  const page = await context.newPage();
  current = page;
  watch(page, [new URL(cfg.openUrl).origin]);

  phase = "load";
  const t0 = Date.now();
  await page.goto(cfg.openUrl);
  await page.waitForSelector("#skill-list .skill");
  await page.waitForSelector("#pending-list .candidate");
  await page.waitForSelector("#timeline li[data-generation]");
  await page.waitForSelector("#trajectory-rows tr.trajectory");
  await page.waitForSelector("#training-body svg.chart");
  await page.waitForSelector("#evidence-rows tr.evidence");
  results.timings.first_data_ms = Date.now() - t0;
  results.timings.navigation = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    return { dom_content_loaded_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd };
  });
  results.steps.load = {
    authHidden: await page.isHidden("#auth"),
    appVisible: await page.isVisible("#app"),
    badge: await badge(page),
    skills: await names(page, "#skill-list .skill", "skill"),
    candidates: await names(page, "#pending-list .candidate", "candidate"),
    generations: await names(page, "#timeline li[data-generation]", "generation"),
    rollbackButtons: await page.locator("#timeline button.rollback").count(),
    trajectories: await page.locator("#trajectory-rows tr.trajectory").count(),
    trajectoryText: await page.innerText("#trajectory-rows"),
    health: await page.innerText("#health"),
    training: await page.innerText("#training-body"),
    evidence: await names(page, "#evidence-rows tr.evidence", "skill"),
    evidenceText: await page.innerText("#evidence"),
    timeline: await page.innerText("#timeline"),
  };

  // Untrusted text from a trajectory is shown as text and never runs.
  results.steps.hostile = await page.evaluate(() => ({
    xss: window.__xss === undefined ? null : window.__xss,
    images: document.querySelectorAll("#app img").length,
    scripts: document.querySelectorAll("#app script").length,
    queries: [...document.querySelectorAll("#trajectory-rows .query")].map((n) => n.textContent),
  }));

  // Provenance of the evolved skill: open its details.
  const card = page.locator(`#skill-list .skill[data-skill="${cfg.evolved}"]`);
  await card.locator("summary", { hasText: "provenance" }).click();
  await card.locator(".prov").waitFor();
  results.steps.provenance = await card.locator(".prov").innerText();
  await shoot(page, "dashboard.png");

  phase = "search";
  await page.fill("#skill-search", cfg.search);
  await page.waitForFunction(() => document.getElementById("skill-count").textContent.includes(" of "));
  const searched = {
    skills: await names(page, "#skill-list .skill", "skill"),
    count: await page.textContent("#skill-count"),
  };
  await page.fill("#skill-search", "no-such-skill-anywhere");
  await page.waitForFunction(() => document.querySelectorAll("#skill-list .skill").length === 0);
  searched.none = await texts(page, "#skill-list .empty");
  await page.fill("#skill-search", "");
  await page.waitForFunction(() => document.querySelectorAll("#skill-list .skill").length > 0);
  searched.cleared = await names(page, "#skill-list .skill", "skill");
  results.steps.search = searched;

  phase = "approve";
  const before = Number((await badge(page)).replace("generation ", ""));
  await page.click(`#pending-list .candidate[data-candidate="${cfg.candidate}"] button.approve`);
  await waitForGeneration(page, before + 1);
  await page.waitForSelector(`#skill-list .skill[data-skill="${cfg.candidate}"]`);
  await page.waitForSelector("#pending-list .empty");
  results.steps.approve = {
    before,
    badge: await badge(page),
    skills: await names(page, "#skill-list .skill", "skill"),
    candidates: await names(page, "#pending-list .candidate", "candidate"),
    newest: await page.innerText("#timeline li:first-child"),
  };

  phase = "rollback";
  const item = page.locator(`#timeline li[data-generation="${before}"]`);
  await item.locator("button.rollback").click();
  await item.locator("button.rollback-confirm").click();
  await waitForGeneration(page, before + 2);
  await page.waitForSelector(`#skill-list .skill[data-skill="${cfg.candidate}"]`, {
    state: "detached",
  });
  results.steps.rollback = {
    badge: await badge(page),
    skills: await names(page, "#skill-list .skill", "skill"),
    newest: await page.innerText("#timeline li:first-child"),
    notice: (await page.isVisible("#notice")) ? await page.textContent("#notice") : null,
  };
  await shoot(page, "dashboard-after-rollback.png");

  // Another agent: its skill added through the API (as that agent), then picked in the page.
  phase = "agents";
  const origin = new URL(cfg.openUrl).origin;
  const added = await page.request.post(origin + "/v1/skills", {
    headers: { "X-MetaClaw-Agent": cfg.otherAgent },
    data: { skills: [cfg.otherSkill], reason: "the other agent's first skill" },
  });
  const sentAgents = [];
  page.on("request", (r) => {
    if (new URL(r.url()).pathname.startsWith("/v1/")) sentAgents.push(r.headers()["x-metaclaw-agent"] || null);
  });
  await page.reload();
  await page.waitForSelector("#agent-pick:not([hidden])");
  const options = await page.$$eval("#agent-select option", (nodes) => nodes.map((n) => n.value));
  const pickedBefore = await page.inputValue("#agent-select");
  sentAgents.length = 0;
  await page.selectOption("#agent-select", cfg.otherAgent);
  await page.waitForFunction(
    (name) => [...document.querySelectorAll("#skill-list .skill")].map((n) => n.dataset.skill).join() === name,
    cfg.otherSkill.name,
  );
  await page.waitForSelector("#pending-list .empty");
  results.steps.agents = {
    added: added.status(),
    options,
    pickedBefore,
    skills: await names(page, "#skill-list .skill", "skill"),
    candidates: await names(page, "#pending-list .candidate", "candidate"),
    badge: await badge(page),
    sent: [...new Set(sentAgents)],
    stored: await page.evaluate(() => sessionStorage.getItem("metaclaw.agent")),
  };
  await shoot(page, "dashboard-other-agent.png");
  await page.selectOption("#agent-select", options.find((o) => o !== cfg.otherAgent));
  await page.waitForFunction(
    (n) => document.querySelectorAll("#skill-list .skill").length === n,
    results.steps.rollback.skills.length,
  );
  results.steps.agents.back = await names(page, "#skill-list .skill", "skill");
  await page.close();
}

async function guardedDashboard(context) {
  const page = await context.newPage(); // a new tab: empty sessionStorage
  current = page;
  watch(page, [new URL(cfg.guardedUrl).origin]);
  const apiCalls = [];
  page.on("request", (r) => {
    const url = new URL(r.url());
    if (url.pathname.startsWith("/v1/")) {
      apiCalls.push({ phase, path: url.pathname, auth: r.headers().authorization || null });
    }
  });

  phase = "auth-prompt";
  await page.goto(cfg.guardedUrl);
  await page.waitForSelector("#auth", { state: "visible" });
  results.steps.authPrompt = {
    appHidden: await page.isHidden("#app"),
    prompt: await page.innerText("#auth"),
    apiCalls: apiCalls.length,
    skillCards: await page.locator(".skill").count(),
  };
  await shoot(page, "dashboard-auth.png");

  phase = "auth-wrong";
  await page.fill("#token-input", "not-the-token");
  await page.click("#token-submit");
  await page.waitForSelector("#auth-error", { state: "visible" });
  results.steps.authWrong = {
    error: await page.textContent("#auth-error"),
    appHidden: await page.isHidden("#app"),
  };

  phase = "auth-ok";
  const before = apiCalls.length;
  await page.fill("#token-input", cfg.token);
  await page.press("#token-input", "Enter");
  await page.waitForSelector("#skill-list .skill");
  await page.waitForSelector("#trajectory-rows tr.trajectory");
  results.steps.authOk = {
    authHidden: await page.isHidden("#auth"),
    skills: await names(page, "#skill-list .skill", "skill"),
    stored: await page.evaluate(() => sessionStorage.getItem("metaclaw.token")),
    calls: apiCalls.slice(before).map((c) => ({ path: c.path, auth: c.auth })),
  };

  phase = "auth-reload";
  await page.reload();
  await page.waitForSelector("#skill-list .skill");
  results.steps.authReload = { authHidden: await page.isHidden("#auth") };

  phase = "auth-forget";
  await page.click("#token-forget");
  await page.waitForSelector("#auth", { state: "visible" });
  results.steps.authForget = {
    appHidden: await page.isHidden("#app"),
    stored: await page.evaluate(() => sessionStorage.getItem("metaclaw.token")),
  };
  await page.close();
}

const userDataDir = mkdtempSync(join(tmpdir(), "metaclaw-chromium-"));
let context = null;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: cfg.chromium,
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 1000 },
  });
  context.setDefaultTimeout(cfg.timeoutMs || 30000);
  results.browserVersion = context.browser()?.version() ?? null;
  await openDashboard(context);
  await guardedDashboard(context);
} catch (err) {
  results.fatal = `${phase}: ${err && err.stack ? err.stack : err}`;
  if (current !== null) await shoot(current, "failure.png").catch(() => {});
} finally {
  if (context !== null) await context.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
  writeFileSync(join(cfg.outDir, "results.json"), JSON.stringify(results, null, 2));
}
