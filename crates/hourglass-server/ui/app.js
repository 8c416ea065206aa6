// hourglass dashboard. Plain JavaScript, no library, no build step: every
// value the server sends is put on the page as text, never as markup.
"use strict";

const REFRESH_MS = 1000;          // the page polls at most every 2 s; this is 1 s
const PAGE_SIZE = 50;             // tasks per page of a queue's listing
const STATES = ["scheduled", "due", "leased", "dead"];
const TOKEN_KEY = "hourglass.token";
const DUMP_BYTES_MAX = 4096;      // bytes of a payload that is not JSON shown in its hex dump

let readOnly = false;
let me = null;                    // GET /v1/whoami: the token's name
let latest = null;                // the overview last read: each queue says what the token may do there
let freshNext = false;            // after an action: see it at once, not the shared reading

// The overview's path: the server shares one reading of the queues among
// pages for up to half a second, except right after this page changed something.
function overviewPath() {
  const path = freshNext ? "/v1/overview?fresh=true" : "/v1/overview";
  freshNext = false;
  return path;
}
let timer = null;
let generation = 0;               // bumped on every navigation: stale refreshes are dropped

// ---------- requests ----------

class Unauthorized extends Error {}

async function api(method, path, body) {
  const headers = { "x-hourglass-ui": "1" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["authorization"] = "Bearer " + token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (response.status === 401) throw new Unauthorized();
  if (response.status === 204) return null;
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (_) { value = null; }
  if (!response.ok) {
    const message = value && value.error ? value.error.code + ": " + value.error.message : response.status + " " + text;
    throw new Error(message);
  }
  return value;
}

function askToken(message) {
  const dialog = document.getElementById("token-dialog");
  if (message) document.getElementById("token-message").textContent = message;
  if (!dialog.open) dialog.showModal();
}

// ---------- small DOM helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    // Through the CSSOM: the content security policy refuses style attributes.
    else if (name === "style") node.style.cssText = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  return node;
}

function toast(message) {
  const node = document.getElementById("toast");
  node.textContent = message;
  node.classList.add("show");
  clearTimeout(node.hideTimer);
  node.hideTimer = setTimeout(() => node.classList.remove("show"), 3000);
}

function confirmed(message) {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-message").textContent = message;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

const number = new Intl.NumberFormat();
function fmt(n) { return n === null || n === undefined ? "–" : number.format(n); }
function ms(n) { return n === null || n === undefined ? "–" : n < 10 ? n.toFixed(2) + " ms" : n < 1000 ? n.toFixed(1) + " ms" : (n / 1000).toFixed(2) + " s"; }
function rate(n) { return n < 10 ? n.toFixed(1) : number.format(Math.round(n)); }

function relative(atMs, nowMs) {
  let s = Math.round((atMs - nowMs) / 1000);
  const future = s > 0;
  s = Math.abs(s);
  const text = s < 60 ? s + " s" : s < 3600 ? Math.round(s / 60) + " min" : s < 172800 ? (s / 3600).toFixed(1) + " h" : Math.round(s / 86400) + " d";
  return s === 0 ? "now" : future ? "in " + text : text + " ago";
}
// How long ago, finer than `relative` under a minute: "0.4 s ago".
function ago(ageMs) { return ageMs < 60000 ? (ageMs / 1000).toFixed(1) + " s ago" : relative(0, ageMs); }
function absolute(atMs) { return new Date(atMs).toLocaleString(); }
function when(atMs, nowMs) {
  if (atMs === null || atMs === undefined) return "–";
  return el("span", { title: new Date(atMs).toISOString() }, absolute(atMs), " ", el("span", { class: "muted" }, "(" + relative(atMs, nowMs) + ")"));
}

// The overview `o` as the page's latest: whether the dashboard is
// read-only, and what the token may do in each queue, as the server says.
function seen(o) {
  readOnly = o.read_only_ui;
  latest = o;
  return o;
}

// Whether the token may do `permission` in `queue`, as the latest overview
// says (the server matches the token's patterns: the page never does).
function can(permission, queue) {
  const q = latest && latest.queues.find((q) => q.name === queue);
  return !!q && q.can.includes(permission);
}

// A button that runs `run`; none on a read-only dashboard, nor where the
// token lacks `need`, a [permission, queue] pair.
function action(label, run, attrs, need) {
  if (readOnly || !can(need[0], need[1])) return null;
  return el("button", Object.assign({ type: "button", onclick: async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    try { await run(); freshNext = true; refresh(); } catch (error) { report(error); } finally { button.disabled = false; }
  } }, attrs || {}), label);
}

function report(error) {
  if (error instanceof Unauthorized) {
    askToken(sessionStorage.getItem(TOKEN_KEY) ? "That token was refused. Give the server's token." : null);
  } else {
    toast(error.message);
  }
}

// ---------- charts: an SVG line chart of the last fifteen minutes ----------

function lineChart(title, points, series, format, test) {
  const width = 600, height = 160, left = 44, bottom = 18, top = 8;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": title });
  const values = points.flatMap((p) => series.map((s) => p[s.key])).filter((v) => v !== null && v !== undefined);
  const max = Math.max(1e-9, ...values) * 1.1;
  const t0 = points.length ? points[0].at_ms : 0, t1 = points.length ? points[points.length - 1].at_ms : 1;
  const x = (t) => left + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (width - left - 4);
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  for (const fraction of [0, 0.5, 1]) {
    const v = max * fraction;
    chart.append(svg("line", { x1: left, x2: width, y1: y(v), y2: y(v), class: "axis" }));
    const label = svg("text", { x: left - 4, y: y(v) + 3, "text-anchor": "end", class: "tick" });
    label.textContent = format(v);
    chart.append(label);
  }
  const span = svg("text", { x: width - 4, y: height - 4, "text-anchor": "end", class: "tick" });
  span.textContent = points.length > 1 ? "last " + relative(t0, t1).replace(" ago", "") : "collecting…";
  chart.append(span);
  for (const s of series) {
    let d = "", pen = "M";
    for (const p of points) {
      const v = p[s.key];
      if (v === null || v === undefined) { pen = "M"; continue; }
      d += `${pen}${x(p.at_ms).toFixed(1)},${y(v).toFixed(1)} `;
      pen = "L";
    }
    if (d) chart.append(svg("path", { d, class: "line " + s.color, "vector-effect": "non-scaling-stroke" }));
    // A point with no neighbour draws no line: mark it.
    points.forEach((p, i) => {
      const v = p[s.key], near = (j) => points[j] && points[j][s.key] !== null && points[j][s.key] !== undefined;
      if (v !== null && v !== undefined && !near(i - 1) && !near(i + 1)) {
        chart.append(svg("circle", { cx: x(p.at_ms), cy: y(v), r: 2.5, class: "dot " + s.color }));
      }
    });
  }
  const legend = el("div", { class: "legend" }, series.map((s) => el("span", {}, el("i", { class: s.color }), s.label)));
  return el("div", { class: "chart", "data-test": test }, el("h2", {}, title), chart, legend);
}

// ---------- pages ----------

async function overviewPage(main) {
  const o = seen(await api("GET", overviewPath()));
  const manages = !readOnly && o.queues.some((q) => can("manage", q.name));
  const t = o.totals;
  const sum = (key) => o.queues.reduce((n, q) => n + q[key], 0);
  main.replaceChildren(
    el("h1", {}, "Overview", readOnly || !manages ? el("span", { class: "badge", "data-test": "read-only" }, "read-only") : null,
      me && me.name !== "anonymous" ? el("span", { class: "badge muted", "data-test": "token-name" }, me.name) : null),
    el("div", { class: "cards", "data-test": "totals" },
      card("tasks", t.tasks), card("scheduled", sum("scheduled")), card("due", sum("due")), card("leased", sum("leased")),
      card("dead", sum("dead")), card("enqueued", t.enqueued), card("delivered", t.delivered), card("acked", t.acked),
      // A scoped token's totals are its queues' sums: the server's schedule count is not among them.
      o.server_wide ? card("schedules", t.schedules) : null),
    ...freshness(o),
    !o.server_wide ? el("p", { class: "muted", "data-test": "charts-hidden" },
      "The charts add up every queue: a token that reads every queue (\"*\") sees them. The totals are your queues'.") :
    el("div", { class: "charts" },
      lineChart("Throughput (tasks/s)", o.history, [
        { key: "enqueued", label: "enqueued", color: "c1" },
        { key: "delivered", label: "delivered", color: "c2" },
        { key: "acked", label: "acked", color: "c3" }], rate, "chart-throughput"),
      lineChart("Delivery lateness", o.history, [
        { key: "lateness_p50_ms", label: "p50", color: "c1" },
        { key: "lateness_p99_ms", label: "p99", color: "c3" }], ms, "chart-lateness")),
    el("h2", {}, "Queues"),
    o.queues.length === 0 ? el("div", { class: "scroll empty" }, "No queue yet. Enqueue a task: POST /v1/queues/NAME/tasks") :
    el("div", { class: "scroll" }, el("table", { "data-test": "queues" },
      el("thead", {}, el("tr", {},
        el("th", {}, "queue"), ...STATES.map((s) => el("th", { class: "num" }, s)),
        el("th", { class: "hide-narrow" }, "oldest due"), el("th", { class: "num hide-narrow" }, "p50"), el("th", { class: "num hide-narrow" }, "p99"),
        el("th", { class: "num hide-narrow" }, "in/s"), el("th", { class: "num hide-narrow" }, "out/s"), el("th", { class: "num hide-narrow" }, "acked/s"),
        manages ? el("th", {}, "") : null)),
      el("tbody", {}, o.queues.map((q) => el("tr", { "data-queue": q.name },
        el("td", {}, el("a", { href: "#/queue/" + encodeURIComponent(q.name) }, q.name), " ", stateBadge(q), ...settingsBadges(q)),
        ...STATES.map((s) => el("td", { class: "num", "data-count": s }, fmt(q[s]))),
        el("td", { class: "hide-narrow" }, q.oldest_due_ms === null ? "–" : relative(q.oldest_due_ms, o.now_ms)),
        el("td", { class: "num hide-narrow" }, q.lateness.samples ? ms(q.lateness.p50) : "–"),
        el("td", { class: "num hide-narrow" }, q.lateness.samples ? ms(q.lateness.p99) : "–"),
        el("td", { class: "num hide-narrow" }, rate(q.rates.enqueued)),
        el("td", { class: "num hide-narrow" }, rate(q.rates.delivered)),
        el("td", { class: "num hide-narrow" }, rate(q.rates.acked)),
        manages ? el("td", {}, pauseButton(q)) : null))))),
    ...nodesPanel(o)
  );
}

// Where several nodes count, how fresh the counters are: every node's
// counts up to `counters_as_of_ms` (the store's clock) are in them. A list
// of what to put on the page: empty where one process counts, exactly.
function freshness(o) {
  const asOf = o.totals.counters_as_of_ms;
  if (asOf === undefined || asOf === null) return [];
  return [el("p", { class: "muted caption", "data-test": "counters-as-of", title: new Date(asOf).toISOString() },
    "Counters as of " + ago(Math.max(0, o.now_ms - asOf)) + ", from every node.")];
}

// The nodes that share the store, when there are several (the server sends
// none for a backend in one process, nor to a token that does not read
// every queue): each one's shards and latest heartbeat. A list of what to
// put on the page, empty without nodes.
function nodesPanel(o) {
  if (!o.nodes) return [];
  return [
    el("h2", {}, "Nodes"),
    el("div", { class: "scroll" }, el("table", { "data-test": "nodes" },
      el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", { class: "num" }, "heartbeat"),
        el("th", { class: "num" }, "shards"), el("th", {}, "held"))),
      el("tbody", {}, o.nodes.map((n) => el("tr", { "data-node": n.name },
        el("td", {}, n.name, n.this ? el("span", { class: "badge this", "data-test": "this-node", title: "The node that answered" }, "this node") : null),
        el("td", { class: "num", "data-field": "heartbeat", title: new Date(n.heartbeat_ms).toISOString() }, ago(n.heartbeat_age_ms)),
        el("td", { class: "num", "data-field": "shard-count" }, fmt(n.shards.length)),
        el("td", { class: "shards", "data-field": "shards" }, n.shards.length ? n.shards.join(" ") : el("span", { class: "muted" }, "none")))))))
  ];
}

function card(label, value) {
  return el("div", { class: "card", "data-total": label }, el("div", { class: "n" }, fmt(value)), el("div", { class: "l" }, label));
}

function stateBadge(q) {
  return q.paused ? el("span", { class: "badge paused", "data-test": "paused" }, "paused") : null;
}

// A queue's push target and flow control, as badges: "push" (its URL on
// hover), its rate, and its tasks in flight against their cap.
function settingsBadges(q) {
  const s = q.settings;
  if (!s) return [];
  return [
    s.push ? el("span", { class: "badge push", title: (s.push.method || "POST") + " " + s.push.url, "data-test": "push" }, "push") : null,
    s.rate_per_s !== undefined ? el("span", { class: "badge flow", "data-test": "rate" }, "≤ " + s.rate_per_s + "/s") : null,
    s.max_in_flight !== undefined ? el("span", { class: "badge flow", "data-test": "in-flight" }, fmt(q.leased) + " / " + fmt(s.max_in_flight) + " in flight") : null,
  ];
}

// A queue's settings in words, for its page.
function settingsLine(q) {
  const s = q.settings;
  if (!s) return el("p", { class: "muted", "data-test": "settings" }, "Delivered to claims; no rate limit, no cap on tasks in flight.");
  const parts = [
    s.push ? "pushed to " + (s.push.method || "POST") + " " + s.push.url + " (timeout " + ms(s.push.timeout_ms) + ")" : "delivered to claims",
    s.rate_per_s !== undefined ? "at most " + s.rate_per_s + " a second" + (s.burst !== undefined ? " (burst " + s.burst + ")" : "") : "no rate limit",
    s.max_in_flight !== undefined ? fmt(q.leased) + " of at most " + fmt(s.max_in_flight) + " in flight" : "no cap on tasks in flight",
  ];
  return el("p", { "data-test": "settings" }, parts.join("; ") + ".");
}

function pauseButton(q) {
  const path = "/v1/queues/" + encodeURIComponent(q.name) + (q.paused ? "/resume" : "/pause");
  return action(q.paused ? "Resume" : "Pause", async () => {
    await api("POST", path, {});
    toast((q.paused ? "Resumed " : "Paused ") + q.name);
  }, { "data-test": q.paused ? "resume" : "pause" }, ["manage", q.name]);
}

async function queuePage(main, name, params) {
  const state = params.get("state") || "";
  const after = params.get("after");
  const base = "/v1/queues/" + encodeURIComponent(name);
  const query = new URLSearchParams({ limit: PAGE_SIZE });
  if (state) query.set("state", state);
  if (after) query.set("after", after);
  const [o, page] = await Promise.all([api("GET", overviewPath()).then(seen), api("GET", base + "/tasks?" + query)]);
  const q = o.queues.find((q) => q.name === name);
  const link = (s, a) => "#/queue/" + encodeURIComponent(name) + "?" + new URLSearchParams(Object.assign(s ? { state: s } : {}, a ? { after: a } : {}));
  main.replaceChildren(
    el("h1", {}, el("a", { href: "#/" }, "Overview"), " / ", name, q ? stateBadge(q) : null),
    q ? el("div", { class: "cards", "data-test": "queue-counts" }, STATES.map((s) => card(s, q[s])),
      card("p50 late (ms)", q.lateness.samples ? +q.lateness.p50.toFixed(2) : null), card("p99 late (ms)", q.lateness.samples ? +q.lateness.p99.toFixed(2) : null))
      : el("p", { class: "muted" }, "This queue has never been used."),
    q ? settingsLine(q) : null,
    q ? el("div", { class: "actions" }, pauseButton(q),
      q.dead > 0 ? action("Delete all " + fmt(q.dead) + " dead", async () => {
        if (!(await confirmed(`Delete every dead task of ${name}? This cannot be undone.`))) return;
        const done = await api("DELETE", base + "/dead");
        toast("Deleted " + fmt(done.deleted) + " dead tasks");
      }, { class: "danger", "data-test": "delete-dead" }, ["manage", name]) : null) : null,
    el("div", { class: "tabs", "data-test": "state-filter" },
      ["", ...STATES].map((s) => el("a", { href: link(s), class: s === state ? "on" : null, "data-state": s || "all" }, s || "all"))),
    page.tasks.length === 0 ? el("div", { class: "scroll empty" }, after ? "No more tasks." : "No tasks" + (state ? " " + state : "") + ".") :
    el("div", { class: "scroll" }, el("table", { "data-test": "tasks" },
      el("thead", {}, el("tr", {}, el("th", { class: "num" }, "id"), el("th", {}, "state"), el("th", {}, "key"),
        el("th", {}, "due"), el("th", { class: "num" }, "attempts"))),
      el("tbody", {}, page.tasks.map((t) => el("tr", { "data-task": t.id },
        el("td", { class: "num" }, el("a", { href: "#/task/" + t.id }, t.id)),
        el("td", {}, el("span", { class: "badge " + t.state }, t.state)),
        el("td", {}, t.key || el("span", { class: "muted" }, "–")),
        el("td", {}, when(t.run_at_ms, o.now_ms)),
        el("td", { class: "num" }, t.attempt + " / " + t.max_attempts)))))),
    el("div", { class: "pager" },
      after ? el("a", { href: link(state) }, "« first page") : null,
      page.next ? el("a", { href: link(state, page.next), "data-test": "next-page" }, "next page »") : null)
  );
}

// Where a task is pushed: its own target, or else its queue's (whose last
// response, when not a 2xx, is the task's last error).
function pushTo(t, o) {
  const target = (h) => (h.method || "POST") + " " + h.url;
  if (t.http) return target(t.http);
  const q = o.queues.find((q) => q.name === t.queue);
  const push = q && q.settings && q.settings.push;
  return push ? target(push) + " (the queue's target)" : null;
}

// A payload as the page shows it: JSON pretty-printed; bytes that are not
// JSON (the API sends them as `payload_base64`) as their size and a hex
// dump of the first DUMP_BYTES_MAX, 16 a row: offset, hex, ASCII.
function payloadText(t) {
  if (typeof t.payload_base64 !== "string") return t.payload === undefined ? "" : JSON.stringify(t.payload, null, 2);
  const encoded = t.payload_base64;
  const size = encoded.length / 4 * 3 - (encoded.match(/=*$/)[0].length);
  let bytes;
  // Only what is shown is decoded (every 4 characters of base64 are 3 bytes).
  try { bytes = atob(encoded.slice(0, Math.ceil(DUMP_BYTES_MAX / 3) * 4)).slice(0, DUMP_BYTES_MAX); }
  catch (_) { return "payload_base64 that is not base64: " + encoded.slice(0, 80); }
  const count = (n) => fmt(n) + (n === 1 ? " byte" : " bytes");
  const lines = [count(size) + ", not JSON", ""];
  for (let at = 0; at < bytes.length; at += 16) {
    const row = Array.from(bytes.slice(at, at + 16), (c) => c.charCodeAt(0));
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = row.map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(at.toString(16).padStart(8, "0") + "  " + hex.padEnd(47) + "  " + ascii);
  }
  if (size > bytes.length) lines.push("", "… and " + count(size - bytes.length) + " more, not shown");
  return lines.join("\n");
}

async function taskPage(main, id) {
  const [o, t] = await Promise.all([api("GET", overviewPath()).then(seen), api("GET", "/v1/tasks/" + id)]);
  const fields = [
    ["id", t.id], ["queue", el("a", { href: "#/queue/" + encodeURIComponent(t.queue) }, t.queue)],
    ["state", el("span", { class: "badge " + t.state, "data-test": "task-state" }, t.state)],
    ["dead reason", t.dead_reason], ["last error", t.last_error], ["due", when(t.run_at_ms, o.now_ms)],
    ["push to", pushTo(t, o)],
    ["attempts", t.attempt + " of " + t.max_attempts], ["key", t.key],
    ["repeats every", t.every_ms === undefined ? null : ms(t.every_ms)],
    ["lease until", t.lease_until_ms === undefined ? null : when(t.lease_until_ms, o.now_ms)],
    ["expires", t.expires_at_ms === undefined ? null : when(t.expires_at_ms, o.now_ms)],
    ["created", when(t.created_ms, o.now_ms)],
  ].filter(([, value]) => value !== null && value !== undefined);
  const path = "/v1/tasks/" + t.id;
  main.replaceChildren(
    el("h1", {}, el("a", { href: "#/" }, "Overview"), " / ", el("a", { href: "#/queue/" + encodeURIComponent(t.queue) }, t.queue), " / task " + t.id),
    el("div", { class: "actions" },
      t.state === "dead" ? action("Retry", async () => { await api("POST", path + "/retry", {}); toast("Task " + t.id + " retried"); }, { "data-test": "retry" }, ["manage", t.queue]) : null,
      t.state === "scheduled" || t.state === "due" ? action("Run now", async () => { await api("PATCH", path, { delay_ms: 0 }); toast("Task " + t.id + " is due now"); }, { "data-test": "run-now" }, ["manage", t.queue]) : null,
      action(t.state === "dead" ? "Delete" : "Cancel", async () => {
        if (!(await confirmed(`${t.state === "dead" ? "Delete" : "Cancel"} task ${t.id}? This cannot be undone.`))) return;
        await api("DELETE", path);
        toast("Task " + t.id + " deleted");
        location.hash = "#/queue/" + encodeURIComponent(t.queue);
      }, { class: "danger", "data-test": "cancel" }, ["manage", t.queue])),
    el("dl", { "data-test": "task-fields" }, fields.flatMap(([name, value]) => [el("dt", {}, name), el("dd", { "data-field": name }, value)])),
    el("h2", {}, "Payload"),
    el("pre", { "data-test": "payload" }, payloadText(t))
  );
}

// ---------- search: a task id, or an idempotency key in any queue ----------

async function search(text) {
  text = text.trim();
  if (!text) return;
  if (/^\d+$/.test(text)) { location.hash = "#/task/" + text; return; }
  const o = await api("GET", "/v1/overview");
  const current = decodeURIComponent((location.hash.match(/^#\/queue\/([^?]+)/) || [])[1] || "");
  const names = o.queues.map((q) => q.name).sort((a, b) => (b === current) - (a === current));
  for (const name of names) {
    try {
      const t = await api("GET", "/v1/queues/" + encodeURIComponent(name) + "/keys/" + encodeURIComponent(text));
      location.hash = "#/task/" + t.id;
      return;
    } catch (error) {
      if (error instanceof Unauthorized) throw error;
    }
  }
  toast("No task with id or key " + JSON.stringify(text));
}

// ---------- routing and refresh ----------

async function render() {
  const mine = generation;
  const main = document.getElementById("main");
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean);
  const live = document.getElementById("live");
  try {
    if (!me) me = await api("GET", "/v1/whoami");
    const scratch = document.createElement("div");
    if (parts[0] === "queue" && parts[1]) await queuePage(scratch, decodeURIComponent(parts[1]), params);
    else if (parts[0] === "task" && /^\d+$/.test(parts[1] || "")) await taskPage(scratch, parts[1]);
    else await overviewPage(scratch);
    if (mine !== generation) return;
    // Swapped whole, after the data arrived: no flicker, no half page.
    main.replaceChildren(...scratch.childNodes);
    live.classList.remove("stale");
  } catch (error) {
    if (mine !== generation) return;
    live.classList.add("stale");
    if (error instanceof Unauthorized) {
      me = null;
      main.replaceChildren(el("p", { class: "error", "data-test": "unauthorized" }, "This server needs a token."));
      report(error);
    } else {
      main.replaceChildren(el("p", { class: "error", "data-test": "error" }, error.message));
    }
  }
}

function refresh() {
  clearTimeout(timer);
  const dialogOpen = document.querySelector("dialog[open]");
  const done = dialogOpen ? Promise.resolve() : render();
  done.finally(() => { timer = setTimeout(refresh, REFRESH_MS); });
}

window.addEventListener("hashchange", () => { generation++; refresh(); });
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("search").addEventListener("submit", (event) => {
    event.preventDefault();
    search(document.getElementById("search-text").value).catch(report);
  });
  document.getElementById("token-form").addEventListener("submit", () => {
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token-input").value);
    me = null;
    document.getElementById("token-input").value = "";
    generation++;
    setTimeout(refresh, 0);
  });
  refresh();
});
