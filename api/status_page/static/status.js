// The status page: reads the node's public API (GET /v1/cluster, /v1/containers,
// /v1/segments, a segment's info and :read) and /metrics, and draws them. Nothing is fetched
// from anywhere else, and nothing is shown until the API has answered: with tokens configured,
// that takes a token, which stays in this tab (sessionStorage) and goes to this node only.
"use strict";

const ROOT = new URL("..", window.location.href); // the node's root, wherever the page sits
const TOKEN_KEY = "segmentstore-token";
const CLUSTER_EVERY_MS = 1000;
const SEGMENTS_EVERY_MS = 3000;
const RATES_EVERY_MS = 2000;
const SEGMENTS_SHOWN = 50;
const TAIL_FIRST_BYTES = 2048;
const TAIL_KEPT_CHARS = 16384;
const TAIL_WAIT_MS = 10000;

const state = {
  token: window.sessionStorage.getItem(TOKEN_KEY),
  timers: [],
  previousRates: null,
  problems: new Map(), // loop -> what went wrong last time
  tail: null, // {name, controller}
};

class NeedsToken extends Error {}

function $(id) {
  return document.getElementById(id);
}

function segmentPath(name) {
  // Names may hold "/" (kept) and "#" (sent as %23), as the API expects.
  return "v1/segments/" + name.split("/").map(encodeURIComponent).join("/");
}

async function call(path, options = {}) {
  const headers = new Headers(options.headers || {});
  if (state.token) {
    headers.set("Authorization", "Bearer " + state.token);
  }
  const response = await fetch(new URL(path, ROOT), { ...options, headers, cache: "no-store" });
  if (response.status === 401 || response.status === 403) {
    throw new NeedsToken(await errorText(response));
  }
  return response;
}

async function callJson(path) {
  const response = await call(path);
  if (!response.ok) {
    throw new Error(`${path}: ${response.status} ${await errorText(response)}`);
  }
  return response.json();
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error ? body.error.message : JSON.stringify(body);
  } catch (_) {
    return response.statusText;
  }
}

// -- drawing ------------------------------------------------------------------------------

function bytes(n) {
  if (n === null || n === undefined) {
    return "";
  }
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return (unit === 0 ? String(value) : value.toFixed(1)) + " " + units[unit];
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) {
    td.className = className;
  }
  row.appendChild(td);
  return td;
}

function replaceRows(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
}

function ago(ms) {
  const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return seconds < 120 ? `${seconds} s ago` : `${Math.round(seconds / 60)} min ago`;
}

function why(container) {
  // Both when both: a container can be read-only (Tier 1) because Tier 2 fails.
  const parts = [];
  if (container.reason) {
    parts.push(container.reason);
  }
  if (container.tier2_error) {
    parts.push("Tier 2: " + container.tier2_error);
  }
  return parts.join("; ");
}

function recoveries(container) {
  const taken = container.takeovers || 0;
  return taken ? `${container.recoveries} + ${taken} taken over` : String(container.recoveries);
}

function drawCluster(cluster, containers) {
  const single = cluster.node === null;
  $("node").textContent = single ? "single node" : "node " + cluster.node;
  $("single-node").hidden = !single;
  $("nodes").hidden = single;
  const missing = cluster.missing || [];
  $("nodes-note").hidden = single;
  $("nodes-note").textContent =
    cluster.leases_held === false
      ? "This node holds no lease now (its lease bucket is out of reach, or lost): it cannot" +
        " vouch for the other nodes."
      : `${cluster.nodes.length} live, ${missing.length} missing (seen alive since this node` +
        " started, gone without leaving)";
  const live = cluster.nodes.map((node) => {
    const row = document.createElement("tr");
    row.dataset.node = node.id;
    row.dataset.state = "live";
    cell(row, node.id + (node.id === cluster.node ? " (this node)" : ""));
    cell(row, node.url);
    cell(row, "live", "status-running");
    cell(row, node.containers.join(", "));
    return row;
  });
  const dead = missing.map((node) => {
    const row = document.createElement("tr");
    row.dataset.node = node.id;
    row.dataset.state = "missing";
    cell(row, node.id);
    cell(row, node.url);
    cell(row, "missing: last seen " + ago(node.last_seen_ms), "status-offline");
    cell(row, "");
    return row;
  });
  replaceRows($("nodes"), [...live, ...dead]);
  const owners = new Map(cluster.containers.map((c) => [c.id, c]));
  replaceRows(
    $("containers"),
    containers.map((c) => {
      const row = document.createElement("tr");
      const owner = c.owner ?? (owners.get(c.id) || {}).owner ?? null;
      row.dataset.container = String(c.id);
      row.dataset.owner = owner ?? "";
      row.dataset.status = c.status;
      row.dataset.epoch = String(c.epoch);
      cell(row, c.id);
      cell(row, owner ?? (single ? "this node" : "nobody"));
      cell(row, c.epoch);
      cell(row, c.status, "status-" + c.status);
      cell(row, c.segments);
      cell(row, bytes(c.tier1_bytes));
      cell(row, bytes(c.tier2_lag_bytes));
      cell(row, recoveries(c));
      cell(row, why(c));
      return row;
    }),
  );
}

async function refreshCluster() {
  const [cluster, containers] = await Promise.all([
    callJson("v1/cluster"),
    callJson("v1/containers"),
  ]);
  drawCluster(cluster, containers.containers);
}

async function refreshSegments() {
  const prefix = $("prefix").value;
  const query = new URLSearchParams({ limit: String(SEGMENTS_SHOWN) });
  if (prefix) {
    query.set("prefix", prefix);
  }
  const listing = await callJson("v1/segments?" + query);
  const infos = await Promise.all(
    listing.segments.map((name) =>
      callJson(segmentPath(name)).catch((error) => ({ name, error: String(error.message) })),
    ),
  );
  replaceRows(
    $("segments"),
    infos.map((info) => {
      const row = document.createElement("tr");
      row.dataset.segment = info.name;
      const nameCell = cell(row, "");
      const link = document.createElement("button");
      link.type = "button";
      link.className = "link";
      link.textContent = info.name;
      link.title = "follow its tail";
      link.addEventListener("click", () => followTail(info.name));
      nameCell.appendChild(link);
      if (info.error) {
        cell(row, info.error, "problem").colSpan = 5;
        return row;
      }
      row.dataset.length = String(info.length);
      cell(row, info.container);
      cell(row, bytes(info.length));
      cell(row, bytes(info.storage_length));
      cell(row, bytes(info.length - info.storage_length));
      cell(row, info.sealed ? "sealed" : "");
      return row;
    }),
  );
  $("segments-note").textContent =
    listing.next === null
      ? `${infos.length} segment(s)`
      : `the first ${infos.length}; narrow them down with a prefix`;
}

// -- rates, from /metrics -----------------------------------------------------------------

// One sample line of the Prometheus text format: {name, labels, value}, or null. A label's
// value is a quoted string that may hold "}", "," and escaped quotes (a route template such
// as /v1/segments/{name}:append does), so it is read character by character, not matched.
function parseSample(line) {
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
  if (!name) {
    return null;
  }
  let at = name[0].length;
  const labels = {};
  if (line[at] === "{") {
    at += 1;
    for (;;) {
      const start = /^\s*(?:,\s*)?/.exec(line.slice(at));
      at += start[0].length;
      if (line[at] === "}") {
        at += 1;
        break;
      }
      const key = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(at));
      if (!key) {
        return null;
      }
      at += key[0].length;
      let value = "";
      while (at < line.length && line[at] !== '"') {
        if (line[at] === "\\") {
          const escaped = line[at + 1];
          value += escaped === "n" ? "\n" : escaped;
          at += 2;
        } else {
          value += line[at];
          at += 1;
        }
      }
      if (at >= line.length) {
        return null;
      }
      at += 1; // the closing quote
      labels[key[1]] = value;
    }
  }
  const value = line.slice(at).trim().split(/\s+/)[0];
  if (value === undefined || value === "") {
    return null;
  }
  return { name: name[0], labels, value: Number(value) };
}

function parseMetrics(text) {
  const sums = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) {
      continue;
    }
    const sample = parseSample(line);
    if (sample === null) {
      continue;
    }
    const add = (key) => sums.set(key, (sums.get(key) || 0) + sample.value);
    add(sample.name);
    const status = sample.labels.status || "";
    if (sample.name === "segmentstore_http_requests_total" && status.startsWith("5")) {
      add("http_5xx");
    }
  }
  return sums;
}

const RATES = [
  ["requests/s", "segmentstore_http_requests_total", (v) => v.toFixed(1)],
  ["5xx answers/s", "http_5xx", (v) => v.toFixed(1)],
  ["appended/s", "segmentstore_append_bytes_total", (v) => bytes(Math.round(v))],
  ["events appended/s", "segmentstore_appended_events_total", (v) => v.toFixed(1)],
  ["forwarded/s", "segmentstore_cluster_forwarded_requests_total", (v) => v.toFixed(1)],
];

async function refreshRates() {
  const response = await call("metrics");
  const now = performance.now();
  const sums = parseMetrics(await response.text());
  const figures = [];
  const before = state.previousRates;
  for (const [label, key, format] of RATES) {
    if (!sums.has(key) && key !== "http_5xx") {
      continue;
    }
    let shown = "…";
    if (before !== null) {
      const seconds = (now - before.at) / 1000;
      const delta = (sums.get(key) || 0) - (before.sums.get(key) || 0);
      shown = format(Math.max(0, delta) / seconds);
    }
    figures.push([label, shown, key]);
  }
  if (sums.has("segmentstore_cache_used_bytes")) {
    const used = sums.get("segmentstore_cache_used_bytes");
    const max = sums.get("segmentstore_cache_max_bytes");
    figures.push(["cache", `${bytes(used)} of ${bytes(max)}`, "cache"]);
  }
  if (sums.has("segmentstore_node_ready")) {
    const ready = sums.get("segmentstore_node_ready") === 1;
    figures.push(["ready", ready ? "yes" : "no", "ready"]);
  }
  state.previousRates = { at: now, sums };
  $("rates").replaceChildren(
    ...figures.map(([label, value, key]) => {
      const pair = document.createElement("div"); // a <dl> may group each dt/dd in a div
      const dt = document.createElement("dt");
      dt.textContent = label;
      const dd = document.createElement("dd");
      dd.textContent = value;
      dd.dataset.rate = key;
      pair.append(dt, dd);
      return pair;
    }),
  );
}

// -- a segment's tail, followed live ------------------------------------------------------

function stopTail() {
  if (state.tail !== null) {
    state.tail.controller.abort();
    state.tail = null;
  }
  $("tail-section").hidden = true;
}

async function followTail(name) {
  stopTail();
  const controller = new AbortController();
  const tail = { name, controller };
  state.tail = tail;
  $("tail-section").hidden = false;
  $("tail-name").textContent = name;
  $("tail").textContent = "";
  const decoder = new TextDecoder("utf-8", { fatal: false });
  const says = (text) => {
    $("tail-state").textContent = text;
  };
  try {
    const info = await callJson(segmentPath(name));
    let offset = Math.max(info.start_offset, info.length - TAIL_FIRST_BYTES);
    while (state.tail === tail) {
      says(`following from offset ${offset}`);
      const query = new URLSearchParams({ offset: String(offset), wait_ms: String(TAIL_WAIT_MS) });
      let response;
      try {
        response = await call(segmentPath(name) + ":read?" + query, { signal: controller.signal });
      } catch (error) {
        if (controller.signal.aborted || error instanceof NeedsToken) {
          throw error;
        }
        says("the node does not answer; trying again");
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      if (response.status === 200) {
        const chunk = new Uint8Array(await response.arrayBuffer());
        offset += chunk.length;
        const pre = $("tail");
        pre.textContent = (pre.textContent + decoder.decode(chunk, { stream: true })).slice(
          -TAIL_KEPT_CHARS,
        );
        pre.dataset.offset = String(offset);
      } else if (response.status === 204) {
        continue; // nothing new within the wait: ask again
      } else if (response.status === 410) {
        const body = await response.json();
        offset = body.error.start_offset; // truncated below us: go on from the new start
      } else if (response.status === 503 || response.status === 429) {
        // The container is recovering or moving, or the node pushes back: not for long.
        says(`${response.status} ${await errorText(response)}; trying again`);
        await new Promise((resolve) => setTimeout(resolve, 1000));
      } else if (response.status === 416) {
        says(`sealed at offset ${offset}: nothing more will come`);
        return;
      } else {
        says(`stopped: ${response.status} ${await errorText(response)}`);
        return;
      }
    }
  } catch (error) {
    if (error instanceof NeedsToken) {
      needToken(error.message);
    } else if (!controller.signal.aborted) {
      says(`stopped: ${error.message}`);
    }
  }
}

// -- the loop, and the token --------------------------------------------------------------

function every(what, ms, work) {
  const run = async () => {
    try {
      await work();
      state.problems.delete(what);
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      if (error instanceof NeedsToken) {
        needToken(error.message);
        return;
      }
      state.problems.set(what, `cannot read ${what}: ${error.message}`);
    }
    $("problem").hidden = state.problems.size === 0;
    $("problem").textContent = [...state.problems.values()].join("; ");
  };
  run();
  state.timers.push(setInterval(run, ms));
}

function stopAll() {
  state.timers.forEach(clearInterval);
  state.timers = [];
  stopTail();
}

function clearEverything() {
  // Nothing read with a token stays on the page once the token is refused or forgotten.
  for (const id of ["nodes", "containers", "segments"]) {
    replaceRows($(id), []);
  }
  for (const id of ["rates", "tail", "node", "updated", "segments-note", "nodes-note", "problem"]) {
    $(id).replaceChildren();
  }
  state.previousRates = null;
  state.problems.clear();
}

function needToken(why) {
  stopAll();
  clearEverything();
  $("status").hidden = true;
  $("login").hidden = false;
  $("forget-token").hidden = true;
  $("login-error").textContent = state.token ? "This node refused the token: " + why : "";
  $("token").focus();
}

async function start() {
  stopAll();
  // One look before showing anything: is a token needed, and is the one we have good?
  try {
    await call("v1/cluster").then((r) => {
      if (!r.ok) {
        throw new Error(`v1/cluster: ${r.status}`);
      }
    });
  } catch (error) {
    if (error instanceof NeedsToken) {
      needToken(error.message);
      return;
    }
    // Not an auth problem: show the page, whose loops report what is wrong.
  }
  $("login").hidden = true;
  $("status").hidden = false;
  $("forget-token").hidden = !state.token;
  every("the cluster", CLUSTER_EVERY_MS, refreshCluster);
  every("the segments", SEGMENTS_EVERY_MS, refreshSegments);
  every("the rates", RATES_EVERY_MS, refreshRates);
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  $("token").value = "";
  window.sessionStorage.setItem(TOKEN_KEY, state.token);
  start();
});

$("forget-token").addEventListener("click", () => {
  window.sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  needToken("");
});

$("segment-filter").addEventListener("submit", (event) => {
  event.preventDefault();
  refreshSegments().catch(() => {});
});

$("tail-stop").addEventListener("click", stopTail);

start();
