/*
 * The entity page's neighbourhood drawing (#51): the entity and its neighbours as an SVG laid out
 * by d3-force (vendored: static/vendor/d3-force, the global d3). Clicking a node (or Enter on it)
 * expands it: its capped neighbourhood (GET /api/projects/{id}/graph/entities/{id}/neighbourhood,
 * at most LIMIT neighbours of the ticked types) joins the drawing, never more than MAX_NODES in
 * all, and the status line links to the node's page. The type boxes hide and show nodes by type.
 */

const SVG = "http://www.w3.org/2000/svg";
const LIMIT = 40;
const MAX_NODES = 300;
const WIDTH = 900;
const HEIGHT = 460;
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#7f8c8d"];

const root = document.getElementById("neighbourhood");
const svg = document.getElementById("neighbourhood-svg");
const statusLine = document.getElementById("neighbourhood-status");
const typeBox = document.getElementById("neighbourhood-types");
const projectId = root.dataset.projectId;
const entityBase = root.dataset.entityBase;

const nodes = new Map();
const links = new Map();
const hidden = new Set();
const colours = new Map();
let selected = null;

function el(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function colour(type) {
  if (!colours.has(type)) colours.set(type, PALETTE[colours.size % PALETTE.length]);
  return colours.get(type);
}

svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
const linkLayer = el("g", { class: "edges" });
const nodeLayer = el("g", { class: "nodes" });
svg.append(linkLayer, nodeLayer);

const simulation = d3
  .forceSimulation([])
  .force("link", d3.forceLink([]).id((d) => d.id).distance(80))
  .force("charge", d3.forceManyBody().strength(-220))
  .force("center", d3.forceCenter(WIDTH / 2, HEIGHT / 2))
  .force("collide", d3.forceCollide(16))
  .on("tick", place);

function place() {
  for (const link of links.values()) {
    const { source: a, target: b } = link;
    link.view.setAttribute("x1", a.x.toFixed(1));
    link.view.setAttribute("y1", a.y.toFixed(1));
    link.view.setAttribute("x2", b.x.toFixed(1));
    link.view.setAttribute("y2", b.y.toFixed(1));
    link.label.setAttribute("x", ((a.x + b.x) / 2).toFixed(1));
    link.label.setAttribute("y", ((a.y + b.y) / 2 - 3).toFixed(1));
  }
  for (const node of nodes.values()) {
    node.x = Math.max(12, Math.min(WIDTH - 12, node.x));
    node.y = Math.max(12, Math.min(HEIGHT - 12, node.y));
    node.view.setAttribute("transform", `translate(${node.x.toFixed(1)},${node.y.toFixed(1)})`);
  }
}

function drag(node, g) {
  let moving = null;
  g.addEventListener("pointerdown", (ev) => {
    const ctm = svg.getScreenCTM();
    if (!ctm) return;
    moving = { x: ev.clientX, y: ev.clientY, moved: false, scale: ctm.a };
    g.setPointerCapture(ev.pointerId);
  });
  g.addEventListener("pointermove", (ev) => {
    if (!moving) return;
    const dx = (ev.clientX - moving.x) / moving.scale;
    const dy = (ev.clientY - moving.y) / moving.scale;
    if (!moving.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    moving.moved = true;
    node.fx = node.x + dx;
    node.fy = node.y + dy;
    moving.x = ev.clientX;
    moving.y = ev.clientY;
    simulation.alpha(0.3).restart();
  });
  g.addEventListener("pointerup", () => {
    if (moving && !moving.moved) choose(node);
    moving = null;
  });
}

function addNode(data, near) {
  if (nodes.has(data.id)) return nodes.get(data.id);
  if (nodes.size >= MAX_NODES) return null;
  const node = { ...data, expanded: false, x: near ? near.x + (Math.random() - 0.5) * 40 : WIDTH / 2, y: near ? near.y + (Math.random() - 0.5) * 40 : HEIGHT / 2 };
  const g = el("g", { class: "node", tabindex: 0, role: "button", "data-entity-id": data.id, "data-type": data.type });
  g.setAttribute("aria-label", `${data.name} (${data.type}): expand`);
  const circle = el("circle", { r: 9, fill: colour(data.type) });
  const title = el("title");
  title.textContent = `${data.name} · ${data.type}`;
  circle.append(title);
  const label = el("text", { x: 0, y: -13, "text-anchor": "middle" });
  label.textContent = data.name.length > 24 ? data.name.slice(0, 23) + "…" : data.name;
  g.append(circle, label);
  g.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" || ev.key === " ") {
      ev.preventDefault();
      choose(node);
    }
  });
  g.addEventListener("dblclick", () => {
    window.location.href = entityBase + node.id;
  });
  drag(node, g);
  node.view = g;
  nodeLayer.append(g);
  nodes.set(data.id, node);
  return node;
}

function addLink(data) {
  if (links.has(data.id) || !nodes.has(data.src) || !nodes.has(data.dst)) return;
  const view = el("line", { class: "edge" });
  const title = el("title");
  title.textContent = data.type;
  view.append(title);
  const label = el("text", { class: "edge-label", "text-anchor": "middle" });
  label.textContent = data.type;
  linkLayer.append(view, label);
  links.set(data.id, { id: data.id, type: data.type, source: data.src, target: data.dst, view, label });
}

function refresh() {
  simulation.nodes(Array.from(nodes.values()));
  simulation.force("link").links(Array.from(links.values()));
  simulation.alpha(0.8).restart();
  const showLabels = links.size <= 60;
  for (const node of nodes.values()) node.view.style.display = shown(node) ? "" : "none";
  for (const link of links.values()) {
    const show = shown(nodeOf(link.source)) && shown(nodeOf(link.target));
    link.view.style.display = show ? "" : "none";
    link.label.style.display = show && showLabels ? "" : "none";
  }
  drawTypes();
  root.dataset.nodes = String(nodes.size);
}

// The page's own entity stays drawn whatever its type.
function shown(node) {
  return node.center || !hidden.has(node.type);
}

function nodeOf(end) {
  return typeof end === "object" ? end : nodes.get(end);
}

function drawTypes() {
  const counts = new Map();
  for (const node of nodes.values()) counts.set(node.type, (counts.get(node.type) || 0) + 1);
  typeBox.replaceChildren();
  for (const [type, count] of Array.from(counts).sort()) {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = !hidden.has(type);
    box.dataset.type = type;
    box.addEventListener("change", () => {
      if (box.checked) hidden.delete(type);
      else hidden.add(type);
      refresh();
    });
    const swatch = document.createElement("span");
    swatch.className = "legend-swatch";
    swatch.style.background = colour(type);
    label.append(box, swatch, `${type} (${count})`);
    typeBox.append(label);
  }
}

function say(node, found) {
  statusLine.replaceChildren();
  const link = document.createElement("a");
  link.href = entityBase + node.id;
  link.textContent = node.name;
  link.id = "neighbourhood-selected";
  statusLine.append("Selected: ", link, ` (${node.type}). ${found} `);
  statusLine.append(`${nodes.size} entities and ${links.size} relationships drawn.`);
}

async function expand(node) {
  const params = new URLSearchParams({ limit: String(LIMIT) });
  const shown = Array.from(colours.keys()).filter((t) => !hidden.has(t));
  if (hidden.size) shown.forEach((t) => params.append("type", t));
  const res = await fetch(`/api/projects/${projectId}/graph/entities/${encodeURIComponent(node.id)}/neighbourhood?${params}`, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error((data && data.error) || `request failed (${res.status})`);
  let dropped = 0;
  for (const other of data.nodes) if (!addNode(other, node)) dropped += 1;
  data.edges.forEach(addLink);
  node.expanded = true;
  node.view.classList.add("expanded");
  const total = Object.values(data.types).reduce((a, b) => a + b, 0);
  let found = `${data.nodes.length} of its ${total}${data.truncated ? "+" : ""} neighbours shown.`;
  if (dropped) found += ` ${dropped} left out: the drawing holds at most ${MAX_NODES}.`;
  return found;
}

async function choose(node) {
  if (selected) selected.view.classList.remove("selected");
  selected = node;
  node.view.classList.add("selected");
  let found = "";
  if (!node.expanded) {
    root.dataset.ready = "false";
    statusLine.textContent = `Expanding ${node.name}…`;
    try {
      found = await expand(node);
    } catch (err) {
      found = `Could not expand it: ${err.message}.`;
    }
    refresh();
    root.dataset.ready = "true";
  }
  say(node, found);
}

async function start() {
  const res = await fetch(`/api/projects/${projectId}/graph/entities/${root.dataset.entityId}/neighbourhood?limit=${LIMIT}`, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    statusLine.textContent = `The neighbourhood could not be drawn: ${(data && data.error) || res.status}.`;
    return;
  }
  const center = addNode(data.center);
  center.center = true;
  center.fx = WIDTH / 2;
  center.fy = HEIGHT / 2;
  center.view.classList.add("center");
  data.nodes.forEach((n) => addNode(n, center));
  data.edges.forEach(addLink);
  center.expanded = true;
  center.view.classList.add("expanded");
  refresh();
  const total = Object.values(data.types).reduce((a, b) => a + b, 0);
  say(center, `${data.nodes.length} of its ${total}${data.truncated ? "+" : ""} neighbours shown.`);
  root.dataset.ready = "true";
}

start();
