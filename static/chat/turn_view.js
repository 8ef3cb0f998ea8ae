/*
 * How a turn is drawn: the user's bubble, and one assistant block (TurnView) whose parts, text
 * segments and rows of tool chips, appear in the order the frames arrived, then the answer's
 * subgraph, its sources and its actions. Live turns and persisted history use the same block.
 */

import { el, announce, nearBottom, scrollToBottom, parseMaybeJson } from "./dom.js";
import * as KGGraph from "./graph.js";
import * as KGMarkdown from "./markdown.js";
import { openEntity, openTrace } from "./panels.js";
import { ui } from "./state.js";
import { ToolChip } from "./tool_chip.js";
import { approvalCard } from "./approval_card.js";

/* A write call's stored result that says it never ran because of the approval's outcome. */
const DECISION_CODES = { approval_rejected: "rejected", approval_expired: "expired" };

export function userBubble(text, id) {
  const article = el("article", "message message-user");
  article.setAttribute("aria-label", "You");
  if (id) article.dataset.messageId = id;
  const body = el("div", "message-body");
  body.appendChild(KGMarkdown.render(text || ""));
  article.appendChild(body);
  ui.messages.appendChild(article);
  return article;
}

/* One assistant answer: text and tool chips in order, then the subgraph, citations, actions. */
export class TurnView {
  /* onRetry(text) sends the question again; the Retry button of an error calls it. */
  constructor({ live, userText, userMessageId, before, onRetry }) {
    this.live = live;
    this.onRetry = onRetry || null;
    this.userText = userText || "";
    this.userMessageId = userMessageId || null;
    this.lastSeq = 0;
    this.meta = null;
    this.runId = null;
    this.model = null;
    this.parts = [];
    this.chips = new Map();
    this.results = [];
    this.citations = [];
    this.linkable = [];
    this.finished = false;
    this.dirty = new Set();

    this.el = el("article", "message message-assistant");
    this.el.setAttribute("aria-label", "Assistant");
    const head = el("div", "message-head");
    this.headLabel = el("span", "message-author", "Assistant");
    this.modelEl = el("span", "message-model");
    head.appendChild(this.headLabel);
    head.appendChild(this.modelEl);
    this.actions = el("span", "message-actions");
    head.appendChild(this.actions);
    this.el.appendChild(head);
    this.body = el("div", "message-body");
    if (live) {
      this.body.setAttribute("aria-live", "polite");
      this.body.setAttribute("aria-busy", "true");
      this.typing = el("div", "typing", "");
      this.typing.setAttribute("aria-label", "Thinking");
      this.typing.append(el("span"), el("span"), el("span"));
      this.body.appendChild(this.typing);
    }
    this.el.appendChild(this.body);
    this.graphEl = el("div", "answer-graph");
    this.graphEl.hidden = true;
    this.el.appendChild(this.graphEl);
    this.citationsEl = el("div", "citations");
    this.citationsEl.hidden = true;
    this.el.appendChild(this.citationsEl);
    this.errorEl = el("div", "turn-error");
    this.errorEl.hidden = true;
    this.el.appendChild(this.errorEl);
    if (before) ui.messages.insertBefore(this.el, before);
    else ui.messages.appendChild(this.el);
    this.el.dataset.state = live ? "streaming" : "done";
    this.el.turnView = this;
  }

  bindMeta(frame) {
    this.meta = frame;
    this.lastSeq = frame.seq || 1;
    this.userMessageId = frame.messageId;
    if (frame.runId) this.runId = frame.runId;
    this.setModel(frame.model);
    if (frame.messageId) this.el.dataset.userMessageId = frame.messageId;
  }

  setModel(model) {
    if (!model) return;
    this.model = model;
    this.modelEl.textContent = model;
    this.modelEl.title = "Served by " + model;
  }

  clearTyping() {
    if (this.typing) {
      this.typing.remove();
      this.typing = null;
    }
  }

  textPart() {
    const last = this.parts[this.parts.length - 1];
    if (last && last.kind === "text") return last;
    this.clearTyping();
    const part = { kind: "text", text: "", el: el("div", "md") };
    this.body.appendChild(part.el);
    this.parts.push(part);
    return part;
  }

  toolRow() {
    const last = this.parts[this.parts.length - 1];
    if (last && last.kind === "tools") return last;
    this.clearTyping();
    const part = { kind: "tools", el: el("div", "tool-row") };
    this.body.appendChild(part.el);
    this.parts.push(part);
    return part;
  }

  appendText(text) {
    if (!text) return;
    const part = this.textPart();
    part.text += text;
    this.dirty.add(part);
    this.scheduleRender();
  }

  scheduleRender() {
    if (this.frame) return;
    this.frame = window.requestAnimationFrame(() => {
      this.frame = null;
      const stick = nearBottom();
      for (const part of this.dirty) this.renderText(part);
      this.dirty.clear();
      if (stick) scrollToBottom(true);
    });
  }

  entityNames() {
    const names = new Map();
    const add = (e) => {
      if (e && e.name && e.id && !names.has(e.name.toLowerCase())) names.set(e.name.toLowerCase(), e);
    };
    const graph = KGGraph.collect(this.results);
    graph.nodes.forEach(add);
    this.citations.filter((c) => c.kind !== "passage").forEach(add);
    this.linkable.forEach(add);
    return names;
  }

  renderText(part) {
    part.el.replaceChildren(
      KGMarkdown.render(part.text, {
        entityNames: this.finished ? this.entityNames() : null,
        passages: this.passageCitations(),
      }),
    );
  }

  passageCitations() {
    return new Map(this.citations.filter((c) => c.kind === "passage").map((c) => [c.id, c]));
  }

  addTool(call, live) {
    const id = call.callId || call.id;
    const existing = id && this.chips.get(id);
    if (existing) return existing;
    const chip = new ToolChip(call, live);
    this.toolRow().el.appendChild(chip.el);
    if (id) this.chips.set(id, chip);
    return chip;
  }

  toolFrame(frame) {
    let chip = this.chips.get(frame.callId);
    if (frame.status === "started") {
      chip = this.addTool(frame, true);
      if (frame.input !== undefined) {
        chip.input = frame.input;
        chip.renderDetail();
      }
      return;
    }
    if (!chip) chip = this.addTool(frame, false);
    if (frame.status === "completed") {
      chip.complete(frame.result);
      this.results.push(frame.result);
    } else {
      chip.fail(frame.error);
    }
  }

  /* A tool call of a persisted message: {id, name, input, output, error}. */
  historyTool(call) {
    const chip = this.addTool({ id: call.id, name: call.name, input: call.input }, false);
    this.fillHistoryTool(chip, call);
  }

  fillHistoryTool(chip, call) {
    const duration = call.durationMs !== undefined ? call.durationMs : undefined;
    if (call.input !== undefined && call.input !== null) chip.input = call.input;
    const output = parseMaybeJson(call.output);
    const refused = output && typeof output === "object" ? DECISION_CODES[output.code] : undefined;
    if (refused) chip.decided(refused, output);
    else if (call.error) chip.fail(call.error, duration);
    else if (call.output !== undefined && call.output !== null) {
      chip.complete(parseMaybeJson(call.output), duration);
      this.results.push(chip.result);
    } else chip.setStatus("completed", duration);
    chip.renderDetail();
  }

  /* A proposed graph change waiting for a decision, drawn as a card after the text so far. */
  showApproval(approval, onDecide) {
    this.clearTyping();
    this.body.appendChild(approvalCard(approval, onDecide, this.chips.get(approval.callId)));
  }

  /* "Graph changed since this answer": what changed, and a button asking the question again. */
  showGraphChanged(changed) {
    // The answer is stale (an entity it used was edited, deleted or merged since): a mark in its head.
    this.el.classList.add("message-stale");
    const mark = el("span", "stale-mark", "stale");
    mark.title = "The graph changed since this answer: an entity it used was edited, deleted or merged.";
    this.headLabel.after(mark);
    const box = el("div", "graph-changed");
    box.setAttribute("role", "note");
    box.appendChild(el("strong", "", "Graph changed since this answer"));
    const list = el("ul", "graph-changed-list");
    for (const c of changed.changes || []) {
      const what = c.entityId ? c.name : `${c.src} ${c.type || "→"} ${c.dst}`;
      list.appendChild(el("li", "", `${c.action.replace(/_/g, " ")}: ${what} (version ${c.version})`));
    }
    box.appendChild(list);
    if (this.userText && this.onRetry) {
      const again = el("button", "btn btn-small", "Ask again");
      again.type = "button";
      again.addEventListener("click", () => this.onRetry(this.userText));
      box.appendChild(again);
    }
    this.el.appendChild(box);
  }

  showError(frame) {
    this.clearTyping();
    this.errorEl.hidden = false;
    this.errorEl.replaceChildren();
    this.el.dataset.error = frame.code || "error";
    const cancelled = frame.code === "cancelled";
    this.errorEl.className = "turn-error" + (cancelled ? " turn-stopped" : "");
    this.errorEl.setAttribute("role", "alert");
    const text = cancelled ? "Stopped." : frame.error || "Something went wrong.";
    this.errorEl.appendChild(el("span", "turn-error-text", text));
    if (frame.code && !cancelled) this.errorEl.appendChild(el("code", "turn-error-code", frame.code));
    if (this.userText) {
      const retry = el("button", "btn btn-small", "Retry");
      retry.type = "button";
      retry.addEventListener("click", () => this.onRetry(this.userText));
      this.errorEl.appendChild(retry);
    }
    announce(cancelled ? "Answer stopped" : "Error: " + text);
  }

  finish(done) {
    this.finished = true;
    this.clearTyping();
    if (done) {
      if (done.runId) this.runId = done.runId;
      if (Array.isArray(done.citations)) this.citations = done.citations;
      if (done.messageId) this.el.dataset.messageId = done.messageId;
    }
    this.el.dataset.state = "done";
    this.body.setAttribute("aria-busy", "false");
    if (this.frame) {
      window.cancelAnimationFrame(this.frame);
      this.frame = null;
    }
    this.dirty.clear();
    for (const part of this.parts) if (part.kind === "text") this.renderText(part);
    if (this.parts.length === 0 && this.errorEl.hidden) {
      this.body.appendChild(el("p", "muted small", "(no answer text)"));
    }
    this.drawGraph();
    this.drawCitations();
    this.drawActions();
  }

  drawGraph() {
    const graph = KGGraph.collect(this.results);
    if (graph.nodes.size < 2 && graph.edges.size === 0) {
      this.graphEl.hidden = true;
      return;
    }
    this.graphEl.hidden = false;
    KGGraph.draw(this.graphEl, graph, { onSelect: (node) => openEntity(node.id, node) });
  }

  drawCitations() {
    if (!this.citations.length) {
      this.citationsEl.hidden = true;
      return;
    }
    this.citationsEl.hidden = false;
    this.citationsEl.replaceChildren(el("span", "citations-label", "Sources:"));
    for (const c of this.citations) {
      if (c.kind === "passage") {
        // A cited passage: its document's name (and page), and the start of its text.
        const card = el("span", "citation passage-citation");
        card.dataset.passageId = c.id;
        card.appendChild(el("span", "passage-document", c.name + (c.page ? `, p. ${c.page}` : "")));
        card.appendChild(el("span", "passage-snippet", c.snippet || ""));
        this.citationsEl.appendChild(card);
        continue;
      }
      const a = el("a", "entity-link citation", c.name || c.key || c.id);
      a.href = "#entity-" + encodeURIComponent(c.id);
      a.dataset.entityId = c.id;
      a.title = c.type || "";
      this.citationsEl.appendChild(a);
    }
  }

  drawActions() {
    this.actions.replaceChildren();
    if (this.runId) {
      const trace = el("button", "btn btn-small btn-quiet trace-button", "Run trace");
      trace.type = "button";
      trace.addEventListener("click", () => openTrace(this.runId));
      this.actions.appendChild(trace);
    }
    const text = this.parts.filter((p) => p.kind === "text").map((p) => p.text).join("");
    if (text && navigator.clipboard) {
      const copy = el("button", "btn btn-small btn-quiet", "Copy");
      copy.type = "button";
      copy.addEventListener("click", () => {
        navigator.clipboard.writeText(text).then(() => announce("Copied"), () => announce("Copy failed"));
      });
      this.actions.appendChild(copy);
    }
  }
}
