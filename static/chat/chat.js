/*
 * The chat page. Speaks PROTOCOL.md: REST under /api for lists and details, the websocket
 * /ws/chat/ for turns (chat.message, chat.cancel, chat.subscribe with afterSeq).
 *
 * One page shows one conversation (or a new one). A turn is drawn as one assistant block whose
 * parts (text segments and tool chips) appear in the order the frames arrived; persisted history
 * is drawn with the same block.
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("chat-config").textContent);
  const $ = (id) => document.getElementById(id);
  const ui = {
    projectSelect: $("project-select"),
    connection: $("connection-status"),
    sidebar: $("sidebar"),
    sidebarToggle: $("sidebar-toggle"),
    backdrop: $("sidebar-backdrop"),
    list: $("conversation-list"),
    listEmpty: $("conversation-empty"),
    title: $("conversation-title"),
    agentBadge: $("agent-badge"),
    modelBadge: $("model-badge"),
    picker: $("new-chat-panel"),
    pickerList: $("agent-picker"),
    messages: $("messages"),
    live: $("live-status"),
    composer: $("composer"),
    input: $("message-input"),
    send: $("send-button"),
    stop: $("stop-button"),
    panel: $("side-panel"),
    panelTitle: $("side-panel-title"),
    panelBody: $("side-panel-body"),
    panelClose: $("side-panel-close"),
    dialog: $("confirm-dialog"),
    dialogText: $("confirm-text"),
  };

  const state = {
    projectId: null,
    projects: [],
    agents: [],
    agentsLoaded: false,
    selectedAgentId: null,
    conversationId: config.conversationId || null,
    conversation: null,
    historyLoaded: !config.conversationId,
    answered: new Set(), // user message ids whose answer is already drawn
    userMessages: new Map(), // user message id → text
    turn: null, // the live turn bound to a meta frame
    pending: null, // the turn I started, waiting for its meta frame
    ignoring: false, // replayed frames of a turn already drawn from history
    pendingCancel: false,
    ws: null,
    wsAttempt: 0,
    wsTimer: null,
    outbox: [],
  };

  /* ---------------- helpers ---------------- */

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function cookie(name) {
    const row = document.cookie.split("; ").find((r) => r.startsWith(name + "="));
    return row ? decodeURIComponent(row.slice(name.length + 1)) : "";
  }

  class ApiError extends Error {
    constructor(message, status, code) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET") headers["X-CSRFToken"] = cookie("csrftoken");
    const res = await fetch(config.apiBase + path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status === 401) {
      window.location.href = "/accounts/login/?next=" + encodeURIComponent(window.location.pathname);
      throw new ApiError("not logged in", 401, "unauthorized");
    }
    let data = null;
    if (res.status !== 204) {
      try {
        data = await res.json();
      } catch (_) {
        data = null;
      }
    }
    if (!res.ok) {
      throw new ApiError((data && data.error) || `request failed (${res.status})`, res.status, data && data.code);
    }
    return data;
  }

  function announce(text) {
    ui.live.textContent = "";
    window.setTimeout(() => {
      ui.live.textContent = text;
    }, 30);
  }

  function formatDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  }

  function formatWhen(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return "";
    const now = new Date();
    if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return d.toLocaleDateString([], { month: "short", day: "numeric" });
  }

  function formatSize(chars) {
    if (chars < 1024) return `${chars} B`;
    return `${(chars / 1024).toFixed(1)} KB`;
  }

  function safeJson(value) {
    if (value === undefined) return "";
    try {
      return JSON.stringify(value, null, 2);
    } catch (_) {
      return String(value);
    }
  }

  /* Pretty JSON in a <pre>; long values are folded behind a "show all" button. */
  function jsonBlock(value, label) {
    const text = typeof value === "string" ? value : safeJson(value);
    const wrap = el("div", "json-block");
    if (label) wrap.appendChild(el("div", "json-label", label));
    const pre = el("pre", "json");
    const lines = text.split("\n");
    const folded = lines.length > 30 || text.length > 3000;
    if (folded) {
      let head = lines.slice(0, 30).join("\n");
      if (head.length > 3000) head = head.slice(0, 3000);
      pre.textContent = head + "\n…";
      const more = el("button", "btn btn-small btn-quiet fold-toggle", `Show all (${lines.length} lines, ${formatSize(text.length)})`);
      more.type = "button";
      more.setAttribute("aria-expanded", "false");
      more.addEventListener("click", () => {
        const open = more.getAttribute("aria-expanded") === "true";
        pre.textContent = open ? head + "\n…" : text;
        more.setAttribute("aria-expanded", open ? "false" : "true");
        more.textContent = open ? `Show all (${lines.length} lines, ${formatSize(text.length)})` : "Fold";
      });
      wrap.appendChild(pre);
      wrap.appendChild(more);
    } else {
      pre.textContent = text;
      wrap.appendChild(pre);
    }
    return wrap;
  }

  function parseMaybeJson(text) {
    if (typeof text !== "string") return text;
    try {
      return JSON.parse(text);
    } catch (_) {
      return text;
    }
  }

  function nearBottom() {
    const m = ui.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 120;
  }

  function scrollToBottom(force) {
    if (force || state.stickToBottom) ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  /* ---------------- messages ---------------- */

  function userBubble(text, id) {
    const article = el("article", "message message-user");
    article.setAttribute("aria-label", "You");
    if (id) article.dataset.messageId = id;
    const body = el("div", "message-body");
    body.appendChild(KGMarkdown.render(text || ""));
    article.appendChild(body);
    ui.messages.appendChild(article);
    return article;
  }

  class ToolChip {
    constructor(call, live) {
      this.callId = call.callId || call.id || "";
      this.name = call.tool || call.name || "tool";
      this.input = call.input;
      this.result = undefined;
      this.error = null;
      this.startedAt = live ? performance.now() : null;
      this.el = el("details", "tool-chip");
      this.el.dataset.callId = this.callId;
      this.el.dataset.tool = this.name;
      const summary = el("summary");
      this.statusIcon = el("span", "tool-status");
      this.statusIcon.setAttribute("aria-hidden", "true");
      this.statusText = el("span", "visually-hidden");
      summary.appendChild(this.statusIcon);
      summary.appendChild(el("span", "tool-name", this.name));
      summary.appendChild(this.statusText);
      this.durationEl = el("span", "tool-duration");
      summary.appendChild(this.durationEl);
      this.el.appendChild(summary);
      this.detail = el("div", "tool-detail");
      this.el.appendChild(this.detail);
      this.setStatus("started");
      this.renderDetail();
    }

    setStatus(status, durationMs) {
      this.status = status;
      this.el.dataset.status = status;
      this.statusText.textContent = { started: " running", completed: " done", error: " failed" }[status] || "";
      if (durationMs !== undefined && durationMs !== null) this.durationEl.textContent = formatDuration(durationMs);
    }

    complete(result, durationMs) {
      this.result = result;
      const elapsed = durationMs !== undefined ? durationMs : this.startedAt !== null ? performance.now() - this.startedAt : null;
      this.setStatus("completed", elapsed);
      this.renderDetail();
    }

    fail(error, durationMs) {
      this.error = error || "tool error";
      const elapsed = durationMs !== undefined ? durationMs : this.startedAt !== null ? performance.now() - this.startedAt : null;
      this.setStatus("error", elapsed);
      this.renderDetail();
    }

    renderDetail() {
      this.detail.replaceChildren();
      this.detail.appendChild(jsonBlock(this.input === undefined ? {} : this.input, "Input"));
      if (this.error) {
        const err = el("div", "tool-error");
        err.appendChild(el("div", "json-label", "Error"));
        err.appendChild(el("pre", "json", String(this.error)));
        this.detail.appendChild(err);
      } else if (this.result !== undefined) {
        this.detail.appendChild(jsonBlock(this.result, "Result"));
      } else {
        this.detail.appendChild(el("p", "muted small", "Waiting for the result…"));
      }
    }
  }

  /* One assistant answer: text and tool chips in order, then the subgraph, citations, actions. */
  class TurnView {
    constructor({ live, userText, userMessageId, before }) {
      this.live = live;
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
      this.citations.forEach(add);
      this.linkable.forEach(add);
      return names;
    }

    renderText(part) {
      part.el.replaceChildren(KGMarkdown.render(part.text, { entityNames: this.finished ? this.entityNames() : null }));
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
      if (call.error) chip.fail(call.error, duration);
      else if (call.output !== undefined && call.output !== null) {
        chip.complete(parseMaybeJson(call.output), duration);
        this.results.push(chip.result);
      } else chip.setStatus("completed", duration);
      chip.renderDetail();
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
        retry.addEventListener("click", () => sendMessage(this.userText));
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

  /* Draw persisted messages. Consecutive assistant/tool messages after a user message form one turn. */
  function renderHistory(messages) {
    ui.messages.replaceChildren();
    let turn = null;
    let lastUser = null;
    const turns = [];
    for (let k = 0; k < messages.length; k++) {
      const m = messages[k];
      if (m.role === "user") {
        turn = null;
        lastUser = m;
        state.userMessages.set(m.id, m.content);
        userBubble(m.content, m.id);
        continue;
      }
      if (!turn) {
        turn = new TurnView({ live: false, userText: lastUser ? lastUser.content : "", userMessageId: lastUser ? lastUser.id : null });
        turns.push(turn);
        if (lastUser) state.answered.add(lastUser.id);
      }
      const calls = Array.isArray(m.toolCalls) ? m.toolCalls : [];
      if (m.role === "assistant") {
        const laterInTurn = k + 1 < messages.length && messages[k + 1].role !== "user";
        // A final message that carries both the calls and the answer: the calls came first.
        if (laterInTurn) {
          if (m.content) turn.appendText(m.content);
          calls.forEach((c) => turn.historyTool(c));
        } else {
          calls.forEach((c) => turn.historyTool(c));
          if (m.content) turn.appendText(m.content);
        }
        const ctx = m.retrievalContext || {};
        if (ctx.agent_run_id) turn.runId = ctx.agent_run_id;
        // Plain chats keep what their one search found: those names link too.
        if (Array.isArray(ctx.entities)) turn.linkable = ctx.entities;
        if (ctx.model) turn.setModel(ctx.model);
        if (Array.isArray(m.citations) && m.citations.length) turn.citations = m.citations;
        turn.el.dataset.messageId = m.id;
      } else if (m.role === "tool") {
        if (calls.length) {
          for (const c of calls) {
            const chip = c.id && turn.chips.get(c.id);
            if (chip) turn.fillHistoryTool(chip, c);
            else turn.historyTool(c);
          }
        } else {
          const ctx = m.retrievalContext || {};
          const ref = ctx.tool_call_id || ctx.toolCallId;
          let chip = ref ? turn.chips.get(ref) : null;
          if (!chip) chip = Array.from(turn.chips.values()).find((c) => c.result === undefined && !c.error);
          if (chip) turn.fillHistoryTool(chip, { output: m.content });
          else turn.historyTool({ id: ref || m.id, name: ctx.tool_name || ctx.name || "tool", output: m.content });
        }
      }
    }
    turns.forEach((t) => t.finish(null));
    scrollToBottom(true);
  }

  /* ---------------- websocket ---------------- */

  function setConnection(status, text) {
    ui.connection.dataset.state = status;
    ui.connection.textContent = text;
  }

  function connect() {
    window.clearTimeout(state.wsTimer);
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + window.location.host + config.wsPath);
    state.ws = ws;
    setConnection("connecting", state.wsAttempt ? "Reconnecting…" : "Connecting…");
    ws.addEventListener("open", () => {
      state.wsAttempt = 0;
      setConnection("open", "Connected");
      subscribe();
      const queued = state.outbox.splice(0);
      queued.forEach((msg) => ws.send(JSON.stringify(msg)));
    });
    ws.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (_) {
        return;
      }
      if (frame && typeof frame.type === "string") onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (state.ws !== ws) return;
      state.ws = null;
      if (event.code === 4401) {
        window.location.href = "/accounts/login/?next=" + encodeURIComponent(window.location.pathname);
        return;
      }
      const delay = Math.min(10000, 500 * 2 ** state.wsAttempt) * (0.75 + Math.random() * 0.5);
      state.wsAttempt += 1;
      setConnection("closed", "Reconnecting…");
      state.wsTimer = window.setTimeout(connect, delay);
    });
  }

  function wsSend(msg) {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(msg));
    else state.outbox.push(msg);
  }

  /* Ask for the current turn of this conversation, replaying frames after the last one seen. */
  function subscribe() {
    if (!state.conversationId || !state.historyLoaded) return;
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    const afterSeq = state.turn ? state.turn.lastSeq : 0;
    state.ws.send(JSON.stringify({ type: "chat.subscribe", conversationId: state.conversationId, afterSeq }));
  }

  function setBusy(busy) {
    state.busy = busy;
    ui.stop.hidden = !busy;
    ui.send.hidden = busy;
    ui.composer.classList.toggle("busy", busy);
  }

  function adoptConversation(id) {
    state.conversationId = id;
    state.historyLoaded = true;
    if (window.location.pathname !== `/chat/${id}/`) window.history.replaceState({ conversationId: id }, "", `/chat/${id}/`);
    ui.picker.hidden = true;
    const agent = state.agents.find((a) => a.id === state.selectedAgentId);
    showAgentBadge(agent ? agent.name : "Plain chat");
  }

  function onFrame(frame) {
    if (frame.type === "meta") return onMeta(frame);
    if (frame.type === "error" && typeof frame.seq !== "number") return onRequestError(frame);
    if (state.ignoring) return;
    const turn = state.turn;
    if (!turn) return;
    if (typeof frame.seq === "number") {
      if (frame.seq <= turn.lastSeq) return; // already seen (replay overlap, second delivery)
      if (frame.seq > turn.lastSeq + 1) {
        // A gap: ask for a replay from the last frame we have.
        subscribe();
        return;
      }
      turn.lastSeq = frame.seq;
    }
    switch (frame.type) {
      case "token":
        turn.appendText(frame.token);
        break;
      case "mcp_tool": {
        const stick = nearBottom();
        turn.toolFrame(frame);
        if (stick) scrollToBottom(true);
        break;
      }
      case "error":
        turn.showError(frame);
        break;
      case "done": {
        turn.finish(frame);
        if (turn.userMessageId) state.answered.add(turn.userMessageId);
        state.turn = null;
        setBusy(false);
        if (!turn.el.dataset.error) announce("Answer complete");
        loadConversations();
        scrollToBottom(false);
        break;
      }
      default:
        break;
    }
  }

  /* An error about a request of mine (not part of a turn): a refused message, cancel or subscribe. */
  function onRequestError(frame) {
    if (state.pending) {
      state.pending.showError(frame);
      state.pending.finish(null);
      state.pending = null;
      state.pendingCancel = false;
      const bubble = ui.messages.querySelector("article.message-user.pending");
      if (bubble) bubble.classList.replace("pending", "refused");
      setBusy(false);
      return;
    }
    if (frame.code === "not_running") {
      if (state.turn === null) setBusy(false);
      return;
    }
    announce("Error: " + (frame.error || frame.code));
  }

  function onMeta(frame) {
    if (state.conversationId && frame.conversationId !== state.conversationId) return;
    if (state.turn && state.turn.userMessageId === frame.messageId) return; // the same turn, replayed
    if (state.answered.has(frame.messageId)) {
      // The replay of a turn whose answer history already shows.
      state.ignoring = true;
      return;
    }
    state.ignoring = false;
    if (state.turn && !state.turn.finished) {
      // A new turn began before we saw the previous one end (e.g. frames lost while offline).
      state.turn.finish(null);
    }
    let turn = state.pending;
    state.pending = null;
    if (!state.conversationId) {
      adoptConversation(frame.conversationId);
      loadConversations();
    }
    if (!turn) {
      // A turn started elsewhere (another tab) or in progress when this page loaded.
      const known = state.userMessages.has(frame.messageId);
      if (!known) {
        const bubble = userBubble("…", frame.messageId);
        fillUserMessage(bubble, frame.messageId);
      }
      turn = new TurnView({ live: true, userText: state.userMessages.get(frame.messageId) || "" });
    } else {
      const bubble = ui.messages.querySelector("article.message-user.pending");
      if (bubble) {
        bubble.classList.remove("pending");
        bubble.dataset.messageId = frame.messageId;
      }
    }
    state.userMessages.set(frame.messageId, turn.userText);
    turn.bindMeta(frame);
    state.turn = turn;
    showModel(frame.model);
    setBusy(true);
    announce("Answering…");
    if (state.pendingCancel) {
      state.pendingCancel = false;
      cancelTurn();
    }
    scrollToBottom(true);
  }

  async function fillUserMessage(bubble, messageId) {
    try {
      const conv = await api("GET", `/chat/conversations/${state.conversationId}`);
      const m = (conv.messages || []).find((x) => x.id === messageId);
      if (m) {
        const body = bubble.querySelector(".message-body");
        body.replaceChildren(KGMarkdown.render(m.content));
        state.userMessages.set(messageId, m.content);
        if (state.turn && state.turn.userMessageId === messageId) state.turn.userText = m.content;
      }
    } catch (_) {
      /* the bubble keeps its placeholder */
    }
  }

  function sendMessage(text) {
    const message = (text || "").trim();
    if (!message || state.busy) return false;
    if (!state.conversationId && !state.projectId) {
      announce("Choose a project first");
      return false;
    }
    const msg = { type: "chat.message", message };
    if (state.conversationId) msg.conversationId = state.conversationId;
    else {
      msg.projectId = state.projectId;
      if (state.selectedAgentId) msg.agentDefinitionId = state.selectedAgentId;
    }
    state.stickToBottom = true;
    const bubble = userBubble(message);
    bubble.classList.add("pending");
    state.pending = new TurnView({ live: true, userText: message });
    state.ignoring = false;
    setBusy(true);
    wsSend(msg);
    scrollToBottom(true);
    return true;
  }

  function cancelTurn() {
    if (!state.busy) return;
    if (state.turn && state.conversationId) {
      wsSend({ type: "chat.cancel", conversationId: state.conversationId });
      ui.stop.disabled = true;
      window.setTimeout(() => {
        ui.stop.disabled = false;
      }, 1500);
    } else if (state.pending) {
      state.pendingCancel = true;
    }
  }

  /* ---------------- projects, agents, conversations ---------------- */

  function showModel(model) {
    if (!model) return;
    ui.modelBadge.hidden = false;
    ui.modelBadge.textContent = model;
    ui.modelBadge.title = "Served by " + model;
  }

  function showAgentBadge(name) {
    ui.agentBadge.hidden = !name;
    ui.agentBadge.textContent = name || "";
  }

  async function loadProjects() {
    let data;
    try {
      data = await api("GET", "/projects");
    } catch (err) {
      ui.projectSelect.replaceChildren(el("option", null, "Projects unavailable"));
      announce(err.message);
      return;
    }
    state.projects = data.items || [];
    ui.projectSelect.replaceChildren();
    if (!state.projects.length) {
      ui.projectSelect.appendChild(el("option", null, "No projects"));
      ui.projectSelect.disabled = true;
      ui.messages.replaceChildren(el("p", "empty-state", "You are not a member of any project yet. Ask a project owner to add you."));
      return;
    }
    for (const p of state.projects) {
      const option = el("option", null, p.name);
      option.value = p.id;
      ui.projectSelect.appendChild(option);
    }
    const remembered = window.localStorage.getItem("kgchat.projectId");
    const ids = state.projects.map((p) => p.id);
    state.projectId =
      (config.projectId && ids.includes(config.projectId) && config.projectId) ||
      (remembered && ids.includes(remembered) && remembered) ||
      ids[0];
    ui.projectSelect.value = state.projectId;
    ui.projectSelect.disabled = false;
    window.localStorage.setItem("kgchat.projectId", state.projectId);
  }

  async function loadAgents() {
    state.agents = [];
    try {
      const data = await api("GET", `/projects/${state.projectId}/agent-definitions`);
      state.agents = (data && (data.items || data)) || [];
    } catch (_) {
      state.agents = [];
    }
    state.agentsLoaded = true;
  }

  function renderPicker() {
    ui.pickerList.replaceChildren();
    const options = state.agents.map((a) => ({ id: a.id, name: a.name, description: a.description || "Agent with graph tools" }));
    options.push({ id: "", name: "Plain chat", description: "Search the graph once, then answer — no tool loop." });
    const preferred = state.agents.find((a) => a.isDefault) || state.agents[0];
    if (state.selectedAgentId === null || !options.some((o) => o.id === state.selectedAgentId)) {
      state.selectedAgentId = preferred ? preferred.id : "";
    }
    options.forEach((o, k) => {
      const label = el("label", "agent-option");
      const input = el("input");
      input.type = "radio";
      input.name = "agent";
      input.value = o.id;
      input.id = "agent-option-" + k;
      input.checked = o.id === state.selectedAgentId;
      input.addEventListener("change", () => {
        state.selectedAgentId = input.value;
      });
      const text = el("span", "agent-option-text");
      text.appendChild(el("span", "agent-option-name", o.name));
      text.appendChild(el("span", "agent-option-desc", o.description));
      label.appendChild(input);
      label.appendChild(text);
      ui.pickerList.appendChild(label);
    });
    ui.picker.hidden = false;
  }

  async function loadConversations() {
    if (!state.projectId) return;
    let data;
    try {
      data = await api("GET", `/chat/conversations?projectId=${encodeURIComponent(state.projectId)}`);
    } catch (_) {
      return;
    }
    const items = (data && data.items) || [];
    ui.list.replaceChildren();
    ui.listEmpty.hidden = items.length > 0;
    for (const c of items) ui.list.appendChild(conversationItem(c));
    const current = items.find((c) => c.id === state.conversationId);
    if (current) setTitle(current.title);
  }

  function conversationTitle(c) {
    return (c.title || "").trim() || "Untitled conversation";
  }

  function setTitle(title) {
    const text = (title || "").trim() || (state.conversationId ? "Untitled conversation" : "New chat");
    ui.title.textContent = text;
    document.title = text + " · kgchat";
  }

  function conversationItem(c) {
    const li = el("li", "conversation-item");
    li.dataset.conversationId = c.id;
    const link = el("a", "conversation-link");
    link.href = `/chat/${c.id}/`;
    link.appendChild(el("span", "conversation-name", conversationTitle(c)));
    link.appendChild(el("span", "conversation-when", formatWhen(c.updatedAt || c.createdAt)));
    if (c.id === state.conversationId) {
      link.setAttribute("aria-current", "page");
      li.classList.add("active");
    }
    const rename = el("button", "icon-btn small rename-button");
    rename.type = "button";
    rename.setAttribute("aria-label", `Rename “${conversationTitle(c)}”`);
    rename.title = "Rename";
    rename.appendChild(el("span", null, "✎")).setAttribute("aria-hidden", "true");
    rename.addEventListener("click", () => startRename(li, c));
    const del = el("button", "icon-btn small delete-button");
    del.type = "button";
    del.setAttribute("aria-label", `Delete “${conversationTitle(c)}”`);
    del.title = "Delete";
    del.appendChild(el("span", null, "✕")).setAttribute("aria-hidden", "true");
    del.addEventListener("click", () => confirmDelete(c));
    li.append(link, rename, del);
    return li;
  }

  function startRename(li, c) {
    const form = el("form", "rename-form");
    const label = el("label", "visually-hidden", "New title");
    const input = el("input", "rename-input");
    input.id = "rename-" + c.id;
    label.htmlFor = input.id;
    input.value = c.title || "";
    input.maxLength = 200;
    form.append(label, input);
    li.replaceChildren(form);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== c.title) {
        try {
          await api("PATCH", `/chat/conversations/${c.id}`, { title });
          announce("Renamed");
        } catch (err) {
          announce("Rename failed: " + err.message);
        }
      }
      await loadConversations();
      const again = ui.list.querySelector(`[data-conversation-id="${c.id}"] .rename-button`);
      if (again) again.focus();
    };
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      finish(true);
    });
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") {
        ev.preventDefault();
        ev.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
  }

  function confirmDelete(c) {
    ui.dialogText.textContent = `“${conversationTitle(c)}” and all its messages will be deleted. This cannot be undone.`;
    ui.dialog.returnValue = "";
    ui.dialog.onclose = async () => {
      if (ui.dialog.returnValue !== "confirm") return;
      try {
        await api("DELETE", `/chat/conversations/${c.id}`);
      } catch (err) {
        announce("Delete failed: " + err.message);
        return;
      }
      announce("Conversation deleted");
      if (c.id === state.conversationId) {
        window.location.href = "/chat/";
        return;
      }
      loadConversations();
    };
    ui.dialog.showModal();
  }

  /* ---------------- side panel: entities and run traces ---------------- */

  let panelReturnFocus = null;

  function openPanel(title) {
    if (ui.panel.hidden) panelReturnFocus = document.activeElement;
    ui.panelTitle.textContent = title;
    ui.panelBody.replaceChildren(el("p", "muted", "Loading…"));
    ui.panel.hidden = false;
    document.body.classList.add("panel-open");
    ui.panelClose.focus();
  }

  function closePanel() {
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

  async function openEntity(ref, preview) {
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
    const head = el("p", "entity-head");
    head.appendChild(el("span", "badge", entity.type));
    head.appendChild(el("code", "entity-key", entity.key));
    body.push(head);
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
    ui.panelBody.replaceChildren(...body);
  }

  async function openTrace(runId) {
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

  /* ---------------- wiring ---------------- */

  function autoGrow() {
    ui.input.style.height = "auto";
    ui.input.style.height = Math.min(ui.input.scrollHeight, 220) + "px";
  }

  function toggleSidebar(open) {
    const show = open === undefined ? !document.body.classList.contains("sidebar-open") : open;
    document.body.classList.toggle("sidebar-open", show);
    ui.sidebarToggle.setAttribute("aria-expanded", show ? "true" : "false");
    ui.backdrop.hidden = !show;
    if (show) {
      const first = ui.sidebar.querySelector("a, button");
      if (first) first.focus();
    }
  }

  function wire() {
    ui.composer.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (sendMessage(ui.input.value)) {
        ui.input.value = "";
        autoGrow();
      }
    });
    ui.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        ui.composer.requestSubmit();
      }
    });
    ui.input.addEventListener("input", autoGrow);
    ui.stop.addEventListener("click", cancelTurn);
    document.addEventListener("keydown", (ev) => {
      if (ev.key !== "Escape" || ev.defaultPrevented) return;
      if (ui.dialog.open) return;
      if (state.busy) {
        ev.preventDefault();
        cancelTurn();
      } else if (!ui.panel.hidden) {
        closePanel();
      } else if (document.body.classList.contains("sidebar-open")) {
        toggleSidebar(false);
      }
    });
    ui.panelClose.addEventListener("click", closePanel);
    ui.sidebarToggle.addEventListener("click", () => toggleSidebar());
    ui.backdrop.addEventListener("click", () => toggleSidebar(false));
    ui.messages.addEventListener("scroll", () => {
      state.stickToBottom = nearBottom();
    });
    document.addEventListener("click", (ev) => {
      const link = ev.target.closest && ev.target.closest("a.entity-link");
      if (!link) return;
      ev.preventDefault();
      openEntity(link.dataset.entityId, { name: link.textContent });
    });
    ui.projectSelect.addEventListener("change", async () => {
      window.localStorage.setItem("kgchat.projectId", ui.projectSelect.value);
      if (state.conversationId) {
        window.location.href = "/chat/";
        return;
      }
      state.projectId = ui.projectSelect.value;
      state.selectedAgentId = null;
      await Promise.all([loadAgents(), loadConversations()]);
      renderPicker();
    });
  }

  /* History does not store the model; the latest agent run knows which one served it. */
  async function showServedModel() {
    const turns = Array.from(ui.messages.querySelectorAll("article.message-assistant"));
    const last = turns.map((node) => node.turnView).filter((t) => t && t.runId).pop();
    if (!last) return;
    try {
      const run = await api("GET", `/agent-runs/${last.runId}`);
      if (run.model) {
        last.setModel(run.model);
        if (ui.modelBadge.hidden) showModel(run.model);
      }
    } catch (_) {
      /* the badge stays hidden */
    }
  }

  async function loadConversation() {
    try {
      const conv = await api("GET", `/chat/conversations/${state.conversationId}`);
      state.conversation = conv;
      setTitle(conv.title);
      renderHistory(conv.messages || []);
      return conv;
    } catch (err) {
      ui.messages.replaceChildren(el("p", "form-error", "Could not load this conversation: " + err.message));
      return null;
    }
  }

  async function init() {
    wire();
    setBusy(false);
    state.stickToBottom = true;
    connect();
    await loadProjects();
    if (state.conversationId) {
      ui.picker.hidden = true;
      const [conv] = await Promise.all([loadConversation(), loadAgents(), loadConversations()]);
      state.historyLoaded = true;
      if (conv) {
        showServedModel();
        const agent = state.agents.find((a) => a.id === conv.agentDefinitionId);
        showAgentBadge(conv.agentDefinitionId ? (agent ? agent.name : "Agent") : "Plain chat");
      }
      subscribe();
    } else if (state.projectId) {
      setTitle("");
      await Promise.all([loadAgents(), loadConversations()]);
      renderPicker();
    }
    document.body.dataset.ready = "true";
    ui.input.focus();
  }

  init();
})();
