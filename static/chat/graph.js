/*
 * The answer's subgraph: collect the entities and edges that a turn's graph tools returned and
 * draw them as a small SVG with a force layout. Nodes are labelled by name and coloured by type;
 * clicking (or Enter on) a node calls onSelect(node); nodes can be dragged.
 *
 * This ES module exports collect, draw and isEntity.
 * collect(results) → {nodes: Map(id → entity), edges: Map(id → {id, type, src, dst})}
 *   understands get_entity_edges ({entity, edges:[{id, type, direction, other}]}),
 *   traverse_graph ({nodes, edges:[{id, type, src_id, dst_id}]}) and searches ({results:[entity]}).
 * draw(container, graph, {onSelect}) draws it (at most MAX_NODES nodes).
 */

const SVG = "http://www.w3.org/2000/svg";
const MAX_NODES = 60;
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#7f8c8d"];
let instances = 0;

function isEntity(v) {
  return v && typeof v === "object" && typeof v.id === "string" && typeof v.name === "string" && typeof v.type === "string";
}

function collect(results) {
  const nodes = new Map();
  const edges = new Map();
  const addNode = (e) => {
    if (!isEntity(e)) return null;
    const prev = nodes.get(e.id);
    nodes.set(e.id, Object.assign({}, prev || {}, e));
    return e.id;
  };
  const addEdge = (id, type, src, dst) => {
    if (!src || !dst) return;
    const key = id || src + "|" + type + "|" + dst;
    edges.set(key, { id: key, type: String(type || ""), src, dst });
  };
  for (const result of results || []) {
    if (!result || typeof result !== "object") continue;
    if (isEntity(result.entity) && Array.isArray(result.edges)) {
      const center = addNode(result.entity);
      for (const edge of result.edges) {
        const other = edge && addNode(edge.other);
        if (!other) continue;
        if (edge.direction === "in") addEdge(edge.id, edge.type, other, center);
        else addEdge(edge.id, edge.type, center, other);
      }
    }
    if (Array.isArray(result.nodes)) {
      result.nodes.forEach(addNode);
      for (const edge of Array.isArray(result.edges) ? result.edges : []) {
        if (edge && edge.src_id && edge.dst_id) addEdge(edge.id, edge.type, edge.src_id, edge.dst_id);
      }
    }
    if (Array.isArray(result.results)) result.results.forEach(addNode);
    if (isEntity(result) && !result.entity) addNode(result);
  }
  for (const [key, edge] of edges) {
    if (!nodes.has(edge.src) || !nodes.has(edge.dst)) edges.delete(key);
  }
  return { nodes, edges };
}

function colorFor(type, types) {
  const index = types.indexOf(type);
  return PALETTE[(index < 0 ? 0 : index) % PALETTE.length];
}

/* A deterministic Fruchterman-Reingold layout in a unit box. */
function layout(nodes, edges, width, height) {
  const n = nodes.length;
  const pos = nodes.map((_, k) => {
    const angle = (2 * Math.PI * k) / Math.max(1, n);
    const r = 0.35 + 0.1 * ((k * 7) % 5) / 5;
    return { x: width / 2 + Math.cos(angle) * r * width * 0.5, y: height / 2 + Math.sin(angle) * r * height * 0.5 };
  });
  if (n <= 1) {
    if (n === 1) pos[0] = { x: width / 2, y: height / 2 };
    return pos;
  }
  const index = new Map(nodes.map((node, k) => [node.id, k]));
  const links = edges.map((e) => [index.get(e.src), index.get(e.dst)]).filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const k = Math.sqrt((width * height) / n) * 0.75;
  let temperature = width / 8;
  for (let iter = 0; iter < 300; iter++) {
    const disp = pos.map(() => ({ x: 0, y: 0 }));
    for (let a = 0; a < n; a++) {
      for (let b = a + 1; b < n; b++) {
        let dx = pos[a].x - pos[b].x;
        let dy = pos[a].y - pos[b].y;
        let d = Math.sqrt(dx * dx + dy * dy);
        if (d < 0.01) {
          dx = 0.1 * (a - b);
          dy = 0.1;
          d = 0.15;
        }
        const force = (k * k) / d;
        disp[a].x += (dx / d) * force;
        disp[a].y += (dy / d) * force;
        disp[b].x -= (dx / d) * force;
        disp[b].y -= (dy / d) * force;
      }
    }
    for (const [a, b] of links) {
      const dx = pos[a].x - pos[b].x;
      const dy = pos[a].y - pos[b].y;
      const d = Math.max(0.01, Math.sqrt(dx * dx + dy * dy));
      const force = (d * d) / k;
      disp[a].x -= (dx / d) * force;
      disp[a].y -= (dy / d) * force;
      disp[b].x += (dx / d) * force;
      disp[b].y += (dy / d) * force;
    }
    for (let a = 0; a < n; a++) {
      // Gravity keeps unconnected nodes (search hits) near the middle.
      disp[a].x += (width / 2 - pos[a].x) * 0.05 * k / 10;
      disp[a].y += (height / 2 - pos[a].y) * 0.05 * k / 10;
      const d = Math.max(0.01, Math.sqrt(disp[a].x * disp[a].x + disp[a].y * disp[a].y));
      pos[a].x += (disp[a].x / d) * Math.min(d, temperature);
      pos[a].y += (disp[a].y / d) * Math.min(d, temperature);
    }
    temperature *= 0.985;
  }
  // Fit into the box with a margin for labels.
  const xs = pos.map((p) => p.x);
  const ys = pos.map((p) => p.y);
  const minX = Math.min(...xs), maxX = Math.max(...xs), minY = Math.min(...ys), maxY = Math.max(...ys);
  const mx = Math.min(70, width * 0.14), my = 28;
  return pos.map((p) => ({
    x: maxX - minX < 1 ? width / 2 : mx + ((p.x - minX) / (maxX - minX)) * (width - 2 * mx),
    y: maxY - minY < 1 ? height / 2 : my + ((p.y - minY) / (maxY - minY)) * (height - 2 * my),
  }));
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function truncate(s, n) {
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function draw(container, graph, options) {
  const opts = options || {};
  const all = Array.from(graph.nodes.values());
  const degree = new Map();
  for (const e of graph.edges.values()) {
    degree.set(e.src, (degree.get(e.src) || 0) + 1);
    degree.set(e.dst, (degree.get(e.dst) || 0) + 1);
  }
  const nodes = all
    .map((node, order) => ({ node, order }))
    .sort((a, b) => (degree.get(b.node.id) || 0) - (degree.get(a.node.id) || 0) || a.order - b.order)
    .slice(0, MAX_NODES)
    .map((x) => x.node);
  const shown = new Set(nodes.map((n) => n.id));
  const edges = Array.from(graph.edges.values()).filter((e) => shown.has(e.src) && shown.has(e.dst));
  const types = Array.from(new Set(nodes.map((n) => n.type))).sort();

  // Draw at the container's own width so labels keep their size on a phone.
  const width = Math.max(280, Math.min(640, Math.round(container.clientWidth || 640)));
  const height = nodes.length <= 3 ? 200 : nodes.length <= 12 ? 300 : 380;
  const pos = layout(nodes, edges, width, height);
  const id = "kg-graph-" + ++instances;

  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "graph-svg", role: "group" });
  root.setAttribute("aria-label", `Subgraph: ${nodes.length} entities, ${edges.length} relationships`);
  const defs = svg("defs");
  const marker = svg("marker", { id: id + "-arrow", viewBox: "0 0 10 10", refX: 19, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "graph-arrow" }));
  defs.appendChild(marker);
  root.appendChild(defs);

  const edgeLayer = svg("g", { class: "graph-edges" });
  const nodeLayer = svg("g", { class: "graph-nodes" });
  root.appendChild(edgeLayer);
  root.appendChild(nodeLayer);

  const index = new Map(nodes.map((n, k) => [n.id, k]));
  const edgeViews = edges.map((e) => {
    const line = svg("line", { class: "graph-edge", "marker-end": `url(#${id}-arrow)` });
    const label = svg("text", { class: "graph-edge-label", "text-anchor": "middle" });
    label.textContent = truncate(e.type, 22);
    const title = svg("title");
    title.textContent = e.type;
    line.appendChild(title);
    edgeLayer.appendChild(line);
    if (edges.length <= 40) edgeLayer.appendChild(label);
    return { e, line, label };
  });
  const place = () => {
    for (const { e, line, label } of edgeViews) {
      const a = pos[index.get(e.src)];
      const b = pos[index.get(e.dst)];
      line.setAttribute("x1", a.x.toFixed(1));
      line.setAttribute("y1", a.y.toFixed(1));
      line.setAttribute("x2", b.x.toFixed(1));
      line.setAttribute("y2", b.y.toFixed(1));
      label.setAttribute("x", ((a.x + b.x) / 2).toFixed(1));
      label.setAttribute("y", ((a.y + b.y) / 2 - 3).toFixed(1));
    }
    nodeViews.forEach((g, k) => g.setAttribute("transform", `translate(${pos[k].x.toFixed(1)},${pos[k].y.toFixed(1)})`));
  };

  const nodeViews = nodes.map((node, k) => {
    const g = svg("g", { class: "graph-node", tabindex: 0, role: "button" });
    g.dataset.entityId = node.id;
    g.setAttribute("aria-label", `${node.name} (${node.type})`);
    const circle = svg("circle", { r: 9, fill: colorFor(node.type, types) });
    const title = svg("title");
    title.textContent = `${node.name} · ${node.type}`;
    circle.appendChild(title);
    const label = svg("text", { class: "graph-label", x: 0, y: -13, "text-anchor": "middle" });
    label.textContent = truncate(node.name, 24);
    g.appendChild(circle);
    g.appendChild(label);
    const select = () => {
      nodeLayer.querySelectorAll(".graph-node.selected").forEach((x) => x.classList.remove("selected"));
      g.classList.add("selected");
      if (opts.onSelect) opts.onSelect(node);
    };
    g.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        select();
      }
    });
    let drag = null;
    g.addEventListener("pointerdown", (ev) => {
      const ctm = root.getScreenCTM();
      if (!ctm) return;
      drag = { x: ev.clientX, y: ev.clientY, moved: false, inv: ctm.inverse(), start: { ...pos[k] } };
      g.setPointerCapture(ev.pointerId);
    });
    g.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x;
      const dy = ev.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      pos[k] = {
        x: Math.max(10, Math.min(width - 10, drag.start.x + dx * drag.inv.a)),
        y: Math.max(10, Math.min(height - 10, drag.start.y + dy * drag.inv.d)),
      };
      place();
    });
    g.addEventListener("pointerup", () => {
      if (drag && !drag.moved) select();
      drag = null;
    });
    nodeLayer.appendChild(g);
    return g;
  });
  place();

  const figure = document.createElement("figure");
  figure.className = "graph";
  figure.appendChild(root);
  const caption = document.createElement("figcaption");
  caption.className = "graph-legend";
  for (const type of types) {
    const item = document.createElement("span");
    item.className = "legend-item";
    const swatch = document.createElement("span");
    swatch.className = "legend-swatch";
    swatch.style.background = colorFor(type, types);
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(type));
    caption.appendChild(item);
  }
  const count = document.createElement("span");
  count.className = "legend-count";
  count.textContent = `${nodes.length} entities · ${edges.length} relationships` + (all.length > nodes.length ? ` (of ${all.length})` : "");
  caption.appendChild(count);
  figure.appendChild(caption);
  container.replaceChildren(figure);
  return figure;
}

export { collect, draw, isEntity };
