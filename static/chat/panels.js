/*
 * The side panel: an entity's details and relationships, or an agent run's trace (steps, tool
 * calls, usage). Opening it moves focus to its Close button; closing it gives focus back.
 */

import { api } from "./api.js";
import { el, formatDuration, formatSize, jsonBlock, parseMaybeJson, safeJson } from "./dom.js";
import { config, state, ui } from "./state.js";

let panelReturnFocus = null;

function openPanel(title) {
  if (ui.panel.hidden) panelReturnFocus = document.activeElement;
  ui.panelTitle.textContent = title;
  ui.panelBody.replaceChildren(el("p", "muted", "Loading…"));
  ui.panel.hidden = false;
  document.body.classList.add("panel-open");
  ui.panelClose.focus();
}

export function closePanel() {
  ui.panel.hidden = true;
  document.body.classList.remove("panel-open");
  if (panelReturnFocus && document.contains(panelReturnFocus)) panelReturnFocus.focus();
  panelReturnFocus = null;
}

function definitionList(pairs) {
  const dl = el("dl", "props");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.appendChild(el("dt", null, k));
    const dd = el("dd");
    if (v instanceof Node) dd.appendChild(v);
    else dd.textContent = typeof v === "object" ? safeJson(v) : String(v);
    dl.appendChild(dd);
  }
  return dl;
}

export async function openEntity(ref, preview) {
  openPanel(preview && preview.name ? preview.name : "Entity");
  const projectId = (state.conversation && state.conversation.projectId) || state.projectId;
  let entity;
  try {
    entity = await api("GET", `/projects/${projectId}/graph/entities/${encodeURIComponent(ref)}`);
  } catch (err) {
    ui.panelBody.replaceChildren(el("p", "form-error", err.status === 404 ? "This entity no longer exists." : err.message));
    return;
  }
  ui.panelTitle.textContent = entity.name;
  const body = [];
  // An old citation of an entity merged into this one (#51).
  if (entity.mergedFrom) body.push(el("p", "muted small entity-merged", `Merged into ${entity.name}; cited as ${entity.mergedFrom}.`));
  const head = el("p", "entity-head");
  head.appendChild(el("span", "badge", entity.type));
  head.appendChild(el("code", "entity-key", entity.key));
  body.push(head);
  // Its own page on the graph page (#51): relationships by type, passages, answers, history, drawing.
  body.push(el("p", null, el("a", { class: "entity-page-link", href: `/projects/${projectId}/graph/entities/${entity.id}`, text: "Open its page" })));
  if (entity.description) body.push(el("p", "entity-description", entity.description));
  const props = Object.entries(entity.properties || {});
  if (props.length) {
    body.push(el("h3", null, "Properties"));
    body.push(definitionList(props));
  }
  const edges = entity.edges || [];
  body.push(el("h3", null, `Relationships (${edges.length})`));
  const list = el("ul", "edge-list");
  for (const e of edges.slice(0, 200)) {
    const li = el("li");
    li.appendChild(el("span", "edge-dir", e.direction === "in" ? "←" : "→"));
    li.appendChild(el("span", "edge-type", e.type));
    const a = el("a", "entity-link", e.other.name);
    a.href = "#entity-" + encodeURIComponent(e.other.id);
    a.dataset.entityId = e.other.id;
    li.appendChild(a);
    li.appendChild(el("span", "muted small", " " + e.other.type));
    list.appendChild(li);
  }
  if (edges.length > 200) list.appendChild(el("li", "muted small", `… and ${edges.length - 200} more`));
  body.push(list);
  const history = el("section", "entity-history");
  body.push(history);
  ui.panelBody.replaceChildren(...body);
  await showHistory(history, projectId, entity.id);
}

// How an entity's history says each change happened, from the server's one list of write tools.
const ACTIONS = config.changeActions || {};

function changeFields(change) {
  const before = change.before || {};
  const after = change.after || {};
  const fields = [];
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (safeJson(before[key]) !== safeJson(after[key])) fields.push(key);
  }
  return fields;
}

// The entity's change history (docs/protocol.md §2, the history route): who changed what, when,
// at which graph version, and by which authority (an approval, the agent's policy, a direct call).
async function showHistory(section, projectId, entityId) {
  let page;
  try {
    page = await api("GET", `/projects/${projectId}/graph/entities/${encodeURIComponent(entityId)}/history?limit=20`);
  } catch (err) {
    section.replaceChildren(el("p", "muted small", `Change history unavailable: ${err.message}`));
    return;
  }
  const items = page.items || [];
  const heading = el("h3", null, `Changes (${page.count ?? items.length})`);
  if (!items.length) {
    section.replaceChildren(heading, el("p", "muted small", "No recorded changes."));
    return;
  }
  const list = el("ul", "change-list");
  for (const change of items) {
    const li = el("li", "change");
    li.appendChild(el("span", "change-version", `v${change.version}`));
    li.appendChild(el("span", "change-action", ACTIONS[change.action] || change.action));
    const fields = change.action === "update_entity" ? changeFields(change) : [];
    if (fields.length) li.appendChild(el("span", "change-fields", " " + fields.join(", ")));
    const who = change.user ? ` by ${change.user}` : "";
    const how = change.authority ? ` (${change.authority.replace("_", " ")})` : "";
    li.appendChild(el("span", "muted small", `${who}${how} · ${new Date(change.createdAt).toLocaleString()}`));
    list.appendChild(li);
  }
  section.replaceChildren(heading, list);
}

export async function openTrace(runId) {
  openPanel("Run trace");
  let run;
  try {
    run = await api("GET", `/agent-runs/${runId}`);
  } catch (err) {
    ui.panelBody.replaceChildren(el("p", "form-error", err.message));
    return;
  }
  const usage = run.usage || {};
  const started = run.startedAt ? new Date(run.startedAt) : null;
  const completed = run.completedAt ? new Date(run.completedAt) : null;
  const calls = Array.isArray(run.toolCalls) ? run.toolCalls : [];
  const summary = definitionList([
    ["Status", run.status],
    ["Stop reason", run.stopReason || "—"],
    ["Steps", run.stepCount],
    ["Tool calls", calls.length],
    ["Tokens in", usage.inputTokens],
    ["Tokens out", usage.outputTokens],
    ["Duration", started && completed ? formatDuration(completed - started) : run.status === "running" ? "running" : ""],
    ["Model", run.model],
    ["Error", run.error],
    ["Run id", run.id],
  ]);
  summary.classList.add("trace-summary");
  const body = [summary];
  const messages = Array.isArray(run.messages) ? run.messages : [];
  // One entry per step: what the model said in it and the tools it called.
  const steps = new Map();
  const stepOf = (n) => {
    const key = n === undefined || n === null ? 0 : n;
    if (!steps.has(key)) steps.set(key, { said: [], calls: [] });
    return steps.get(key);
  };
  for (const m of messages) if (m.role === "assistant" && m.content) stepOf(m.stepNumber).said.push(m.content);
  for (const c of calls) stepOf(c.stepNumber).calls.push(c);
  body.push(el("h3", null, "Steps"));
  if (!steps.size) body.push(el("p", "muted small", "No steps were recorded."));
  const ol = el("ol", "trace-steps");
  for (const key of Array.from(steps.keys()).sort((a, b) => a - b)) {
    const step = steps.get(key);
    const li = el("li", "trace-step");
    li.appendChild(el("div", "trace-step-title", `Step ${key}`));
    for (const text of step.said) {
      li.appendChild(el("p", "trace-said", text.length > 240 ? text.slice(0, 240) + "…" : text));
    }
    for (const c of step.calls) {
      const d = el("details", "trace-call");
      d.dataset.status = c.error ? "error" : "completed";
      const s = el("summary");
      s.appendChild(el("span", "tool-name", c.toolName || c.name || "tool"));
      const size = c.output === undefined || c.output === null ? 0 : (typeof c.output === "string" ? c.output : safeJson(c.output)).length;
      s.appendChild(el("span", "trace-meta", `${formatDuration(c.durationMs)} · ${formatSize(size)}${c.error ? " · error" : ""}`));
      d.appendChild(s);
      d.appendChild(jsonBlock(c.input || {}, "Arguments"));
      if (c.error) d.appendChild(jsonBlock(String(c.error), "Error"));
      else d.appendChild(jsonBlock(parseMaybeJson(c.output), "Result"));
      li.appendChild(d);
    }
    ol.appendChild(li);
  }
  body.push(ol);
  if (messages.length) {
    const d = el("details", "trace-messages");
    d.appendChild(el("summary", null, `Run messages (${messages.length})`));
    d.appendChild(jsonBlock(messages));
    body.push(d);
  }
  ui.panelBody.replaceChildren(...body);
}
