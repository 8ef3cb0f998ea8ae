/*
 * The conversation on screen and its turns: persisted history drawn once, then the frames of
 * PROTOCOL.md §3 applied in seq order (a gap asks for a replay, a repeat is dropped). A turn I
 * start is drawn at once and bound to its `meta` frame; a turn started elsewhere (another tab or
 * device: its `turn_started` event brings the message, then the socket follows the turn; or one
 * running when the page loaded) is drawn when its `meta` frame arrives. Stop sends chat.cancel.
 */

import { api } from "./api.js";
import { el, announce, nearBottom, scrollToBottom } from "./dom.js";
import * as KGMarkdown from "./markdown.js";
import { loadConversations, setTitle } from "./sidebar.js";
import { send, subscribe } from "./socket.js";
import { state, ui } from "./state.js";
import { TurnView, userBubble } from "./turn_view.js";
import { approvalDecided, approvalRefused, approvalsUnanswered } from "./approval_card.js";

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
      turn = new TurnView({
        live: false,
        userText: lastUser ? lastUser.content : "",
        userMessageId: lastUser ? lastUser.id : null,
        onRetry: sendMessage,
      });
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
      if (ctx.approval_id) state.pausedTurns.set(ctx.approval_id, turn);
      if (m.graphChanged) turn.showGraphChanged(m.graphChanged);
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

export function setBusy(busy) {
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

/* The decision starts a new turn answering the same user message: follow it. */
function decided() {
  state.resuming = true;
}

/* A decision here or elsewhere (another tab, another member): update the card; when a turn
 * continues the conversation on screen, the socket follows it, so its meta must not be ignored. */
function onApprovalDecided(frame) {
  approvalDecided(frame);
  if (frame.callId) state.decidedCalls.set(frame.callId, frame);
  if (frame.continued && frame.conversationId === state.conversationId) state.resuming = true;
}

/* A message sent in this conversation from another tab or device: draw it now; its turn follows,
 * starting with its meta frame (which then finds the message drawn). */
function onTurnStarted(frame) {
  if (frame.conversationId !== state.conversationId || state.userMessages.has(frame.messageId)) return;
  state.userMessages.set(frame.messageId, frame.content);
  userBubble(frame.content, frame.messageId);
  scrollToBottom(false);
}

export function onFrame(frame) {
  if (frame.type === "meta") return onMeta(frame);
  if (frame.type === "turn_started") return onTurnStarted(frame);
  if (frame.type === "approval_decided") return onApprovalDecided(frame);
  if (frame.type === "error" && typeof frame.seq !== "number") {
    if (state.resuming && !state.pending) {
      state.resuming = false;
      return approvalRefused(frame);
    }
    return onRequestError(frame);
  }
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
      // The decided call, ending in the turn that continues: declined or expired, not failed.
      const decision = frame.status === "error" && state.decidedCalls.get(frame.callId);
      if (decision && turn.chips.get(frame.callId)) turn.chips.get(frame.callId).decided(decision.status, decision.result);
      if (stick) scrollToBottom(true);
      break;
    }
    case "error":
      turn.showError(frame);
      break;
    case "approval_required":
      turn.showApproval(frame, decided);
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
  // Disabled since the page loaded: from now on, say so instead of letting the next message fail too.
  if (frame.code === "agent_definition_disabled" && state.conversationId) closeComposer(frame.error);
  if (state.pending) {
    state.pending.showError(frame);
    state.pending.finish(null);
    state.pending = null;
    state.pendingCancel = false;
    const bubble = ui.messages.querySelector("article.message-user.pending");
    if (bubble) bubble.classList.replace("pending", "refused");
    // Another tab's turn may be streaming here meanwhile (it is why mine was refused).
    setBusy(Boolean(state.turn && !state.turn.finished));
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
  const resuming = state.resuming;
  state.resuming = false;
  if (state.answered.has(frame.messageId) && !resuming) {
    // The replay of a turn whose answer history already shows.
    state.ignoring = true;
    return;
  }
  state.ignoring = false;
  if (state.turn && !state.turn.finished) {
    // A new turn began before we saw the previous one end (e.g. frames lost while offline).
    state.turn.finish(null);
  }
  // My pending message is bound to the first meta of a message I have not seen: a meta whose message
  // is known (drawn from turn_started: another tab's, sent just before mine) is that other turn's,
  // and mine is still waiting for its own meta or its refusal.
  let turn = null;
  if (!state.userMessages.has(frame.messageId)) {
    turn = state.pending;
    state.pending = null;
  }
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
    turn = new TurnView({ live: true, userText: state.userMessages.get(frame.messageId) || "", onRetry: sendMessage });
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

export function sendMessage(text) {
  const message = (text || "").trim();
  if (!message || state.busy || state.closedReason) return false;
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
  const pending = new TurnView({ live: true, userText: message, onRetry: sendMessage });
  state.pending = pending;
  state.ignoring = false;
  setBusy(true);
  send(() => {
    pending.sent = true;
    return msg;
  });
  scrollToBottom(true);
  return true;
}

/* The socket closed. A message of mine that left on it and was neither started (its meta) nor
 * refused may never have arrived: say so, with Retry, rather than wait for an answer that may never
 * come (a queued one waits for the next socket); a decision likewise offers its buttons again. If it
 * did arrive and its turn still runs, the reconnect's subscribe shows that turn as one started
 * elsewhere; what was stored shows on a reload. */
export function onConnectionLost() {
  const lost = {
    type: "error",
    code: "connection_lost",
    error: "The connection closed before the server answered.",
  };
  if (state.pending && state.pending.sent) onRequestError(lost);
  approvalsUnanswered(lost);
}

export function cancelTurn() {
  if (!state.busy) return;
  if (state.turn && state.conversationId) {
    send({ type: "chat.cancel", conversationId: state.conversationId });
    ui.stop.disabled = true;
    window.setTimeout(() => {
      ui.stop.disabled = false;
    }, 1500);
  } else if (state.pending) {
    state.pendingCancel = true;
  }
}

function showModel(model) {
  if (!model) return;
  ui.modelBadge.hidden = false;
  ui.modelBadge.textContent = model;
  ui.modelBadge.title = "Served by " + model;
}

export function showAgentBadge(name) {
  ui.agentBadge.hidden = !name;
  ui.agentBadge.textContent = name || "";
}

/* The conversation's agent definition is disabled: say why, and offer no way to send into a 409. */
export function closeComposer(reason) {
  state.closedReason = reason;
  ui.composerNotice.textContent = `${/[.!?]$/.test(reason) ? reason : reason + "."} Start a new chat to go on.`;
  ui.composerNotice.hidden = false;
  ui.input.disabled = true;
  ui.send.disabled = true;
  ui.input.setAttribute("aria-describedby", "composer-notice composer-hint");
}

export function disabledAgentReason(agent) {
  return `This conversation's agent ${agent.name} is disabled: ${agent.disabledReason}`;
}

/* History does not store the model; the latest agent run knows which one served it. */
export async function showServedModel() {
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

export async function loadConversation() {
  try {
    const conv = await api("GET", `/chat/conversations/${state.conversationId}`);
    state.conversation = conv;
    setTitle(conv.title);
    renderHistory(conv.messages || []);
    for (const a of conv.pendingApprovals || []) {
      const turn = state.pausedTurns.get(a.id);
      if (turn) turn.showApproval({ ...a, approvalId: a.id }, decided);
    }
    return conv;
  } catch (err) {
    ui.messages.replaceChildren(el("p", "form-error", "Could not load this conversation: " + err.message));
    return null;
  }
}
