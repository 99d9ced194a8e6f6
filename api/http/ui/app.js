// cogmill graph explorer: plain modern JS, no libraries, nothing fetched from another origin.
// The API key lives in sessionStorage and goes out only as an Authorization header (never in
// a URL): the job event stream is read with fetch() and a stream reader, not EventSource.
"use strict";

const API = "/api/v1";
const KEY_STORE = "cogmill.apiKey";
const DATASET_STORE = "cogmill.dataset";
const SEARCH_TYPES = [
  "CHUNKS", "CHUNKS_LEXICAL", "SUMMARIES", "RAG_COMPLETION", "TRIPLET_COMPLETION",
  "GRAPH_COMPLETION", "GRAPH_COMPLETION_COT", "GRAPH_COMPLETION_CONTEXT_EXTENSION",
  "GRAPH_COMPLETION_DECOMPOSITION", "GRAPH_SUMMARY_COMPLETION", "HYBRID_COMPLETION",
  "GRAPH_PPR", "TEMPORAL", "CYPHER", "NATURAL_LANGUAGE", "CODING_RULES", "FEELING_LUCKY",
  "AGENTIC_COMPLETION",
];
const MAX_GRAPH_NODES = 400; // the page never holds more, however often one expands
const SVG_NS = "http://www.w3.org/2000/svg";

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  return node;
}

function shortId(id) {
  return String(id).slice(0, 8);
}

// -- status line and API calls ------------------------------------------------------------

// The status line speaks for the view on show: each view keeps its own last message, so a
// search's "5 results" does not stay on while the jobs are shown.
const lastSaid = {};

function currentView() {
  return document.querySelector("#tabs .active").dataset.view;
}

function say(message, kind = "info", view = currentView()) {
  lastSaid[view] = { message, kind };
  if (view !== currentView()) return;
  const status = $("#status");
  status.textContent = message;
  status.className = kind;
}

class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  const key = sessionStorage.getItem(KEY_STORE);
  return key ? { Authorization: `Bearer ${key}`, ...extra } : extra;
}

async function failure(response) {
  let code = "http_" + response.status;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch (_) {
    // not the error schema (a proxy's page): keep the status line
  }
  return new ApiFailure(response.status, code, message);
}

async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(API + path, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

function reported(action) {
  // Failures are shown on the page, never thrown into the console.
  return async (...args) => {
    try {
      await action(...args);
    } catch (err) {
      const hint = err.status === 401 ? " — check the API key" : "";
      say(`${err.message}${hint}`, "error");
    }
  };
}

function dataset() {
  return $("#dataset").value;
}

function datasetPath() {
  return `/datasets/${encodeURIComponent(dataset())}`;
}

// -- key and datasets -----------------------------------------------------------------------

async function connect() {
  const key = $("#api-key").value.trim();
  if (key) sessionStorage.setItem(KEY_STORE, key);
  else sessionStorage.removeItem(KEY_STORE);
  $("#api-key").value = "";
  $("#api-key").placeholder = key ? "key set for this tab (enter another to change it)" : $("#api-key").placeholder;
  await loadDatasets();
}

// What the key may do (GET /api/v1/me): a reader is not offered to change data.
async function loadRole() {
  let role = "writer"; // a server without /me takes the attempt and answers 403 if need be
  try {
    role = (await api("/me")).role;
  } catch (err) {
    if (err.status === 401) throw err;
  }
  document.body.dataset.role = role;
  $("#cognify").hidden = role === "reader";
}

async function loadDatasets() {
  await loadRole();
  const found = await api("/datasets");
  const select = $("#dataset");
  const wanted = sessionStorage.getItem(DATASET_STORE) || select.value;
  select.replaceChildren(
    ...found.map((d) => el("option", { value: d.name }, `${d.name} (${d.documents} documents)`)),
  );
  select.disabled = found.length === 0;
  if (found.some((d) => d.name === wanted)) select.value = wanted;
  document.body.classList.add("connected");
  const message = found.length ? `Connected: ${found.length} datasets.` : "Connected; no datasets yet: add documents first.";
  for (const view of Object.keys(lastSaid)) delete lastSaid[view];
  say(message);
  lastSaid.connection = lastSaid[currentView()];
  if (found.length) await datasetChanged();
}

async function datasetChanged() {
  sessionStorage.setItem(DATASET_STORE, dataset());
  clearGraph();
  $("#results").replaceChildren();
  $("#answer").hidden = true;
  $("#route").textContent = "";
  const current = document.querySelector("#tabs .active").dataset.view;
  if (current === "documents") await loadDocuments();
  if (current === "jobs") await loadJobs();
}

// -- search -----------------------------------------------------------------------------------

async function search() {
  if (!dataset()) return say("Pick a dataset first.", "error");
  const body = { query: $("#query").value.trim(), datasets: [dataset()] };
  if (!body.query) return;
  if ($("#search-type").value) body.search_type = $("#search-type").value;
  const topK = parseInt($("#top-k").value, 10);
  if (topK > 0) body.top_k = topK;
  say("Searching…");
  const found = await api("/search", { method: "POST", body });
  renderSearch(found);
  say(`${found.results.length} results (${found.search_type}).`);
}

// A triplet's key for "each once": the relation and its two ends in either order.
function tripletKey(source, relation, target) {
  return [relation, ...[source, target].sort()].join("\u0000");
}

function renderSearch(found) {
  const route = found.route;
  $("#route").textContent = route
    ? `Router chose ${route.search_type} (confidence ${route.confidence.toFixed(2)}; runner-up ${route.runner_up})${route.reason ? ": " + route.reason : ""}`
    : `Search type ${found.search_type}`;
  // The note opens with the router's own sentence when it routed: said once, above.
  const notes = (found.note || "").split("; ").filter((part) => part && !(route && part.startsWith("routed to ")));
  if (notes.length) $("#route").textContent += ` — ${notes.join("; ")}`;
  const answer = $("#answer");
  answer.hidden = !found.answer;
  answer.textContent = found.answer || "";
  const shown = new Set(); // triplets on the page: a later result does not repeat one
  const items = found.results.map((result, i) => resultItem(result, i, shown));
  $("#results").replaceChildren(...items);
  if (!items.length) $("#results").append(el("li", { class: "empty" }, "No results."));
}

// "A —relation→ B": the triplet lines graph searches put in `evidence`.
const TRIPLET = /^(.+?) —(.+?)→ (.+)$/;

function evidenceLine(line) {
  const match = TRIPLET.exec(line);
  if (!match) return el("li", {}, line);
  const [, source, relation, target] = match;
  return el(
    "li", { class: "triplet" },
    entityButton(source), el("span", { class: "relation" }, ` —${relation}→ `), entityButton(target),
  );
}

function entityButton(name) {
  return el("button", {
    type: "button", class: "entity", title: `Open ${name} in the graph`,
    onclick: reported(() => openGraph({ entity: name })),
  }, name);
}

function resultItem(result, index, shown) {
  // The passage without the evidence lines that lead its text.
  let text = result.text;
  for (const line of result.evidence || []) text = text.replace(line + "\n", "");
  const evidence = (result.evidence || []).filter((line) => {
    const match = TRIPLET.exec(line);
    if (!match) return true;
    const key = tripletKey(match[1], match[2], match[3]);
    if (shown.has(key)) return false;
    shown.add(key);
    return true;
  });
  const sources = (result.sources || []).map((source) => el(
    "li", {},
    el("span", { class: "doc" }, source.document_name),
    " · ",
    el("button", {
      type: "button", class: "chunk", title: "Open this chunk's neighbourhood",
      onclick: reported(() => openGraph({ node: source.chunk_id })),
    }, `chunk ${shortId(source.chunk_id)}`),
  ));
  const first = (result.sources || [])[0];
  return el(
    "li", { class: "result", dataset: { index: String(index) } },
    el("div", { class: "result-head" },
      el("span", { class: "score" }, `#${index + 1} · score ${Number(result.score).toFixed(3)}`),
      first ? el("button", {
        type: "button", class: "show-graph",
        onclick: reported(() => openGraph({ node: first.chunk_id })),
      }, "Show in graph") : null),
    evidence.length ? el("ul", { class: "evidence" }, ...evidence.map(evidenceLine)) : null,
    el("p", { class: "passage" }, text.length > 600 ? text.slice(0, 600) + "…" : text),
    sources.length
      ? el("ul", { class: "sources" }, el("li", { class: "label" }, "Sources:"), ...sources)
      : el("p", { class: "sources none" }, "No source chunk (a completion over the graph)."),
  );
}

// -- graph: data, force layout, rendering ------------------------------------------------

const graph = {
  nodes: new Map(), // id -> {id, type, name, properties, support_total, x, y, vx, vy, expanded}
  edges: new Map(), // "source|name|target" -> {source, target, name, properties}
  selected: null,
  alpha: 0,
  running: false,
  autoFit: true,
  view: { x: -400, y: -300, w: 800, h: 600 },
};

function nodeLabel(node) {
  if (node.name) return node.name.length > 28 ? node.name.slice(0, 27) + "…" : node.name;
  const text = String(node.properties.text || "");
  if (text) return (text.length > 24 ? text.slice(0, 23) + "…" : text);
  return `${node.type} ${shortId(node.id)}`;
}

function clearGraph() {
  graph.nodes.clear();
  graph.edges.clear();
  graph.selected = null;
  $("#nodes").replaceChildren();
  $("#edges").replaceChildren();
  $("#details").replaceChildren(el("p", { class: "hint" }, "Click a node to expand it and see its details; drag to move it; scroll to zoom."));
  $("#graph-count").textContent = "No graph yet: click a result, a source or an entity.";
}

function graphLimit() {
  const limit = parseInt($("#graph-limit").value, 10);
  return Math.min(200, Math.max(5, Number.isFinite(limit) ? limit : 40));
}

async function neighbourhood(seed) {
  const params = new URLSearchParams({ limit: String(graphLimit()) });
  if (seed.node) params.set("node", seed.node);
  else params.set("entity", seed.entity);
  return api(`${datasetPath()}/graph/neighbourhood?${params}`);
}

async function openGraph(seed) {
  const found = await neighbourhood(seed);
  clearGraph();
  merge(found, null);
  select(found.node);
  fit();
}

async function expand(id) {
  const node = graph.nodes.get(id);
  if (!node || node.expanded) return;
  const found = await neighbourhood({ node: id });
  merge(found, node);
}

function merge(found, around) {
  const origin = around || { x: 0, y: 0 };
  let added = 0;
  let skipped = 0;
  for (const item of found.nodes) {
    if (graph.nodes.has(item.id)) continue;
    if (graph.nodes.size >= MAX_GRAPH_NODES) { skipped += 1; continue; }
    const angle = Math.random() * 2 * Math.PI;
    const radius = 40 + Math.random() * 40;
    graph.nodes.set(item.id, {
      ...item, x: origin.x + radius * Math.cos(angle), y: origin.y + radius * Math.sin(angle),
      vx: 0, vy: 0, expanded: false,
    });
    added += 1;
  }
  for (const edge of found.edges) {
    // One line per pair and name: A —r→ B and B —r→ A would draw twice, labels on top.
    const key = tripletKey(edge.source, edge.name, edge.target);
    if (graph.nodes.has(edge.source) && graph.nodes.has(edge.target) && !graph.edges.has(key)) {
      graph.edges.set(key, edge);
    }
  }
  const seed = graph.nodes.get(found.node);
  if (seed) seed.expanded = true;
  const notes = [];
  if (found.truncated) notes.push("more neighbours than the cap: raise “Nodes per expansion”");
  if (skipped) notes.push(`${skipped} not shown: the page keeps at most ${MAX_GRAPH_NODES} nodes`);
  $("#graph-count").textContent =
    `${graph.nodes.size} nodes, ${graph.edges.size} edges (+${added})` +
    (notes.length ? ` — ${notes.join("; ")}` : "");
  render();
  kick();
}

function render() {
  const edgeLayer = $("#edges");
  const nodeLayer = $("#nodes");
  const shownEdges = new Map([...edgeLayer.children].map((g) => [g.dataset.key, g]));
  for (const [key, edge] of graph.edges) {
    if (shownEdges.has(key)) continue;
    const group = svg("g", { class: `edge edge-${edge.name}` });
    group.dataset.key = key;
    group.append(svg("line"));
    const label = svg("text", { class: "edge-label" });
    label.textContent = edge.name.toLowerCase().replaceAll("_", " ");
    group.append(label);
    edgeLayer.append(group);
  }
  const shownNodes = new Set([...nodeLayer.children].map((g) => g.dataset.id));
  for (const node of graph.nodes.values()) {
    if (shownNodes.has(node.id)) continue;
    const group = svg("g", { class: `node type-${node.type}`, tabindex: "0" });
    Object.assign(group.dataset, { id: node.id, name: node.name, type: node.type });
    const title = svg("title");
    title.textContent = `${node.type}: ${node.name || shortId(node.id)}`;
    group.append(svg("circle", { r: node.type === "Entity" ? 9 : 7 }), title);
    const label = svg("text", { x: 12, y: 4 });
    label.textContent = nodeLabel(node);
    group.append(label);
    attachNodeEvents(group, node);
    nodeLayer.append(group);
  }
  for (const group of nodeLayer.children) {
    const node = graph.nodes.get(group.dataset.id);
    group.classList.toggle("expanded", Boolean(node && node.expanded));
    group.classList.toggle("selected", node && graph.selected === node.id);
  }
  draw();
}

function draw() {
  for (const group of $("#edges").children) {
    const edge = graph.edges.get(group.dataset.key);
    const a = graph.nodes.get(edge.source);
    const b = graph.nodes.get(edge.target);
    const line = group.firstChild;
    line.setAttribute("x1", a.x.toFixed(1));
    line.setAttribute("y1", a.y.toFixed(1));
    line.setAttribute("x2", b.x.toFixed(1));
    line.setAttribute("y2", b.y.toFixed(1));
    const label = group.lastChild;
    label.setAttribute("x", ((a.x + b.x) / 2).toFixed(1));
    label.setAttribute("y", ((a.y + b.y) / 2).toFixed(1));
  }
  for (const group of $("#nodes").children) {
    const node = graph.nodes.get(group.dataset.id);
    group.setAttribute("transform", `translate(${node.x.toFixed(1)},${node.y.toFixed(1)})`);
  }
}

// A small force layout (Fruchterman-Reingold): every pair repels with k²/d, edges pull with
// d²/k, a weak pull to the centre keeps pieces together; each move is capped by a temperature
// that cools to a stop. O(n²) per step, fine for the few hundred nodes the page holds.
const SPRING = 80; // k: the rest distance between neighbours, in graph units
const STEPS_PER_FRAME = 3;

function tick() {
  const nodes = [...graph.nodes.values()];
  for (const node of nodes) { node.dx = 0; node.dy = 0; }
  for (let i = 0; i < nodes.length; i += 1) {
    const a = nodes[i];
    for (let j = i + 1; j < nodes.length; j += 1) {
      const b = nodes[j];
      let dx = a.x - b.x;
      let dy = a.y - b.y;
      let d = Math.sqrt(dx * dx + dy * dy);
      if (d < 0.1) { dx = Math.random() - 0.5; dy = Math.random() - 0.5; d = 0.1; }
      const push = (SPRING * SPRING) / d / d;
      a.dx += dx * push; a.dy += dy * push;
      b.dx -= dx * push; b.dy -= dy * push;
    }
  }
  for (const edge of graph.edges.values()) {
    const a = graph.nodes.get(edge.source);
    const b = graph.nodes.get(edge.target);
    if (a === b) continue;
    const dx = a.x - b.x;
    const dy = a.y - b.y;
    const pull = Math.sqrt(dx * dx + dy * dy) / SPRING;
    a.dx -= dx * pull; a.dy -= dy * pull;
    b.dx += dx * pull; b.dy += dy * pull;
  }
  for (const node of nodes) {
    if (node.fixed) continue;
    node.dx -= node.x * 0.08;
    node.dy -= node.y * 0.08;
    const moved = Math.sqrt(node.dx * node.dx + node.dy * node.dy) || 1;
    const step = Math.min(moved, graph.alpha);
    node.x += (node.dx / moved) * step;
    node.y += (node.dy / moved) * step;
  }
  graph.alpha *= 0.96;
}

function kick() {
  graph.alpha = 60; // the temperature: the longest move of a step, in graph units
  if (graph.running) return;
  graph.running = true;
  $("#graph").dataset.layout = "running";
  const step = () => {
    for (let i = 0; i < STEPS_PER_FRAME; i += 1) tick();
    draw();
    if (graph.autoFit) fit();
    if (graph.alpha > 0.3) {
      requestAnimationFrame(step);
      return;
    }
    graph.running = false;
    declutter();
    $("#graph").dataset.layout = "settled";
  };
  requestAnimationFrame(step);
}

// Labels are placed one by one, the selected and expanded nodes' first, then entities', the
// other nodes' and the edges'; one that would overlap a label already placed is hidden (it
// shows when its node is hovered, and in the details). Run when the layout comes to rest.
function declutter() {
  const rank = (g) => g.classList.contains("selected") ? 0 : g.classList.contains("expanded") ? 1
    : g.dataset.type === "Entity" ? 2 : 3;
  const nodes = [...$("#nodes").children].sort((a, b) => rank(a) - rank(b));
  const labels = [
    ...nodes.map((group) => [group.querySelector("text"), graph.nodes.get(group.dataset.id)]),
    ...[...$("#edges").children].map((group) => [group.lastChild, { x: 0, y: 0 }]),
  ];
  const placed = [];
  for (const [label, at] of labels) {
    label.classList.remove("crowded");
    const box = label.getBBox(); // in its group's units: node labels sit at their node
    const rect = { x: at.x + box.x, y: at.y + box.y, w: box.width, h: box.height };
    const clash = placed.some((p) =>
      rect.x < p.x + p.w && p.x < rect.x + rect.w && rect.y < p.y + p.h && p.y < rect.y + rect.h);
    if (clash) label.classList.add("crowded");
    else placed.push(rect);
  }
}

// -- graph interaction: select/expand, drag, zoom ------------------------------------------

function attachNodeEvents(group, node) {
  let start = null;
  group.addEventListener("pointerdown", (event) => {
    start = { x: event.clientX, y: event.clientY, moved: false };
    group.setPointerCapture(event.pointerId);
    node.fixed = true;
  });
  group.addEventListener("pointermove", (event) => {
    if (!start) return;
    if (Math.abs(event.clientX - start.x) + Math.abs(event.clientY - start.y) > 4) start.moved = true;
    if (!start.moved) return;
    const point = toGraph(event);
    node.x = point.x;
    node.y = point.y;
    draw();
  });
  group.addEventListener("pointerup", () => {
    const clicked = start && !start.moved;
    start = null;
    node.fixed = false;
    if (clicked) reported(activate)(node.id);
    else kick();
  });
  group.addEventListener("keydown", (event) => {
    if (event.key === "Enter") reported(activate)(node.id);
  });
}

async function activate(id) {
  select(id);
  await expand(id);
  select(id);
}

function toGraph(event) {
  const box = $("#graph").getBoundingClientRect();
  const { x, y, w, h } = graph.view;
  // preserveAspectRatio xMidYMid meet: one scale for both axes, the view centred.
  const scale = Math.min(box.width / w, box.height / h);
  const left = box.left + (box.width - w * scale) / 2;
  const top = box.top + (box.height - h * scale) / 2;
  return { x: x + (event.clientX - left) / scale, y: y + (event.clientY - top) / scale };
}

function setView(view) {
  graph.view = view;
  $("#graph").setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
}

function zoom(event) {
  event.preventDefault();
  graph.autoFit = false;
  const point = toGraph(event);
  const factor = event.deltaY > 0 ? 1.15 : 1 / 1.15;
  const { x, y, w, h } = graph.view;
  setView({
    x: point.x - (point.x - x) * factor, y: point.y - (point.y - y) * factor,
    w: w * factor, h: h * factor,
  });
}

// The view follows the layout (fit when it settles) until the user zooms.
function fit() {
  graph.autoFit = true;
  const nodes = [...graph.nodes.values()];
  if (!nodes.length) return setView({ x: -400, y: -300, w: 800, h: 600 });
  const xs = nodes.map((n) => n.x);
  const ys = nodes.map((n) => n.y);
  const pad = 40; // room for the labels, which extend to the right of the nodes
  const left = Math.min(...xs) - pad;
  const top = Math.min(...ys) - pad;
  // Never closer than about one unit per pixel: labels stay their size on small graphs.
  let w = Math.max(...xs) - left + pad + 100;
  let h = Math.max(...ys) - top + pad;
  const grow = Math.max(1, 400 / w, 300 / h);
  const cx = left + w / 2;
  const cy = top + h / 2;
  w *= grow;
  h *= grow;
  setView({ x: cx - w / 2, y: cy - h / 2, w, h });
}

function select(id) {
  graph.selected = id;
  for (const group of $("#nodes").children) {
    group.classList.toggle("selected", group.dataset.id === id);
    const node = graph.nodes.get(group.dataset.id);
    group.classList.toggle("expanded", Boolean(node && node.expanded));
  }
  const node = graph.nodes.get(id);
  if (node) showDetails(node);
  if (!graph.running) declutter(); // the selected node's label goes first
}

function showDetails(node) {
  const rows = [];
  for (const [name, value] of Object.entries(node.properties || {})) {
    let text = typeof value === "string" ? value : JSON.stringify(value);
    if (text.length > 500) text = text.slice(0, 500) + "…";
    rows.push(el("tr", {}, el("th", {}, name), el("td", {}, text)));
  }
  const links = [];
  for (const edge of graph.edges.values()) {
    const other = edge.source === node.id ? edge.target : edge.target === node.id ? edge.source : null;
    if (other === null) continue;
    const peer = graph.nodes.get(other);
    const arrow = edge.source === node.id ? `—${edge.name}→` : `←${edge.name}—`;
    links.push(el("li", {}, `${arrow} `, el("button", {
      type: "button", class: "entity", onclick: reported(() => activate(other)),
    }, peer ? nodeLabel(peer) : shortId(other))));
  }
  $("#details").replaceChildren(
    el("h3", {}, node.name || node.type),
    el("p", { class: "meta" }, `${node.type} · ${shortId(node.id)} · supported by ${node.support_total} chunk(s)` +
      (node.expanded ? " · expanded" : "")),
    rows.length ? el("table", { class: "props" }, ...rows) : null,
    links.length ? el("ul", { class: "links" }, ...links.slice(0, 60)) : null,
  );
}

// -- documents ---------------------------------------------------------------------------------

async function loadDocuments() {
  if (!dataset()) return;
  const docs = await api(`${datasetPath()}/data`);
  const rows = docs.map((doc) => el(
    "tr", { dataset: { status: doc.status } },
    el("td", {}, doc.name),
    el("td", {}, el("span", { class: `badge status-${doc.status}` }, doc.status)),
    el("td", { class: "num" }, `${doc.size.toLocaleString()} B`),
    el("td", {}, doc.extension),
    el("td", { class: "error" }, doc.error || ""),
  ));
  $("#documents tbody").replaceChildren(...rows);
  const counts = {};
  for (const doc of docs) counts[doc.status] = (counts[doc.status] || 0) + 1;
  $("#documents-summary").textContent =
    `${docs.length} documents: ` + Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
  say(`${dataset()}: ${docs.length} documents.`, "info", "documents");
}

// -- jobs and their event stream ---------------------------------------------------------

const follower = { job: null, abort: null };

async function loadJobs() {
  const jobs = await api("/jobs");
  const rows = jobs.map((job) => el(
    "tr", { dataset: { job: job.id, status: job.status } },
    el("td", {}, el("code", {}, shortId(job.id))),
    el("td", {}, job.dataset),
    el("td", {}, el("span", { class: `badge status-${job.status}` }, job.status)),
    el("td", { class: "num" }, `${job.counts.batches_done || 0}/${job.total_batches}`),
    el("td", { class: "num" }, String(job.total_documents)),
    el("td", {}, new Date(job.created_at).toLocaleString()),
    el("td", {}, el("button", {
      type: "button", class: "follow", onclick: reported(() => followJob(job.id)),
    }, "Follow")),
  ));
  $("#jobs tbody").replaceChildren(...rows);
  if (!follower.job) say(`${jobs.length} jobs.`, "info", "jobs");
  const running = jobs.find((job) => job.status === "running" || job.status === "queued");
  if (running && follower.job !== running.id) await followJob(running.id);
}

async function cognify() {
  if (!dataset()) return say("Pick a dataset first.", "error");
  const started = await api(`${datasetPath()}/cognify`, { method: "POST", body: {} });
  say(`Cognify job ${shortId(started.job_id)}: ${started.status}. ${started.message || ""}`, "info", "jobs");
  await followJob(started.job_id);
  await loadJobs();
}

function showProgress(state) {
  const total = Math.max(state.total, 1);
  $("#job-bar").max = total;
  $("#job-bar").value = state.done;
  $("#job-status").textContent = state.status;
  $("#job-status").className = `badge status-${state.status}`;
  $("#job-text").textContent = `${state.done} of ${state.total} batches done` +
    (state.documents ? ` · ${state.documents} documents` : "");
  const box = $("#job-progress");
  box.dataset.done = String(state.done);
  box.dataset.total = String(state.total);
  box.dataset.status = state.status;
}

function eventLine(kind, data) {
  const parts = Object.entries(data).filter(([k]) => k !== "event").map(([k, v]) => `${k}=${v}`);
  return el("li", { class: `event-${kind}` }, el("strong", {}, kind), " ", parts.join(" "));
}

async function followJob(jobId) {
  if (follower.abort) follower.abort.abort();
  const abort = new AbortController();
  Object.assign(follower, { job: jobId, abort });
  const job = await api(`/jobs/${encodeURIComponent(jobId)}`);
  const state = {
    total: job.total_batches, done: job.counts.batches_done || 0,
    documents: job.total_documents, status: job.status,
  };
  $("#job-progress").hidden = false;
  $("#job-id").textContent = shortId(jobId);
  $("#job-events").replaceChildren();
  showProgress(state);
  try {
    await readEvents(jobId, abort.signal, (kind, data) => {
      if (kind === "planned") Object.assign(state, { total: data.batches, documents: data.documents });
      if (kind === "batch_done") state.done = Math.min(state.total, state.done + 1);
      // A progress event's counts may be read just before the batch_done events it follows.
      if (kind === "progress") {
        Object.assign(state, { done: Math.max(state.done, data.batches_done || 0), status: data.status });
      }
      if (kind === "finished") state.status = data.status;
      if (kind !== "progress") $("#job-events").append(eventLine(kind, data));
      showProgress(state);
    });
  } catch (err) {
    if (err.name === "AbortError") return;
    throw err;
  }
  if (follower.job === jobId) {
    follower.job = null;
    say(`Job ${shortId(jobId)} ${state.status}.`, "info", "jobs");
    await loadJobs();
  }
}

// Server-sent events over fetch(): frames split by a blank line, `id:`, `event:` and `data:`
// fields. A stream the server ends before `finished` (its time limit) is opened again after
// the last event id seen.
async function readEvents(jobId, signal, onEvent) {
  let last = 0;
  let finished = false;
  const seen = (kind, data, id) => {
    if (id !== null) last = id;
    if (kind === "finished") finished = true;
    onEvent(kind, data);
  };
  for (let attempt = 0; !finished && attempt < 100; attempt += 1) {
    const query = last ? `?after=${last}` : "";
    const response = await fetch(`${API}/jobs/${encodeURIComponent(jobId)}/events${query}`, {
      headers: headers({ Accept: "text/event-stream" }), signal,
    });
    if (!response.ok) throw await failure(response);
    await readFrames(response.body, seen);
  }
}

async function readFrames(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let id = null;
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("id:")) id = parseInt(line.slice(3).trim(), 10);
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(kind, JSON.parse(data.join("\n")), Number.isFinite(id) ? id : null);
    }
  }
}

// -- tabs and start-up ----------------------------------------------------------------------

async function showView(view) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.view === view);
  }
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== `view-${view}`;
  }
  const said = lastSaid[view] || lastSaid.connection || { message: "", kind: "info" };
  $("#status").textContent = said.message;
  $("#status").className = said.kind;
  if (!document.body.classList.contains("connected")) return;
  if (view === "documents") await loadDocuments();
  if (view === "jobs") await loadJobs();
}

function start() {
  $("#search-type").append(...SEARCH_TYPES.map((t) => el("option", { value: t }, t)));
  $("#key-form").addEventListener("submit", (event) => { event.preventDefault(); reported(connect)(); });
  $("#dataset").addEventListener("change", reported(datasetChanged));
  $("#search-form").addEventListener("submit", (event) => { event.preventDefault(); reported(search)(); });
  $("#entity-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("#entity").value.trim();
    if (name) reported(openGraph)({ entity: name });
  });
  for (const button of document.querySelectorAll("#tabs button")) {
    button.addEventListener("click", reported(() => showView(button.dataset.view)));
  }
  $("#documents-refresh").addEventListener("click", reported(loadDocuments));
  $("#jobs-refresh").addEventListener("click", reported(loadJobs));
  $("#cognify").addEventListener("click", reported(cognify));
  $("#graph-fit").addEventListener("click", fit);
  $("#graph-clear").addEventListener("click", clearGraph);
  $("#graph").addEventListener("wheel", zoom, { passive: false });
  if (sessionStorage.getItem(KEY_STORE)) {
    $("#api-key").placeholder = "key set for this tab (enter another to change it)";
    reported(loadDatasets)();
  }
}

start();
