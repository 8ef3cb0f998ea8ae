/*
 * The chat page. Speaks PROTOCOL.md: REST under /api for lists and details, the WebSocket
 * /ws/chat/ for turns (chat.message, chat.cancel, chat.subscribe with afterSeq).
 *
 * One page shows one conversation (or a new one). A turn is drawn as one assistant block whose
 * parts (text segments and tool chips) appear in the order the frames arrived; persisted history
 * is drawn with the same block.
 *
 * This is the entry module (templates/chat/chat.html loads it with type="module"; no build step):
 * it wires the page's controls and starts it. The parts, each an ES module of this folder:
 *   state.js         config, the page's elements (ui) and the shared state
 *   api.js           the REST client          socket.js     the WebSocket: reconnect, outbox, subscribe;
 *                                                           every client message goes through its send()
 *   conversation.js  history and live turns   turn_view.js  one turn drawn (text, chips, subgraph)
 *   tool_chip.js     one tool call's chip     sidebar.js    the conversation list, rename, delete
 *   picker.js        projects, agents, the "who answers" picker
 *   panels.js        the side panel: entity details and run traces
 *   dom.js           element and formatting helpers; markdown.js and graph.js render answers
 * Another part of the page can be its own module with its own <script type="module">, importing
 * api.js, dom.js and state.js: modules are evaluated once per page, so it shares their objects.
 */

import {
  cancelTurn,
  closeComposer,
  disabledAgentReason,
  loadConversation,
  onConnectionLost,
  onFrame,
  sendMessage,
  setBusy,
  showAgentBadge,
  showServedModel,
} from "./conversation.js";
import { nearBottom } from "./dom.js";
import { openEntity, closePanel } from "./panels.js";
import { loadAgents, loadProjects, renderPicker } from "./picker.js";
import { loadConversations, setTitle, toggleSidebar } from "./sidebar.js";
import { connect, subscribe } from "./socket.js";
import { state, ui } from "./state.js";

function autoGrow() {
  ui.input.style.height = "auto";
  ui.input.style.height = Math.min(ui.input.scrollHeight, 220) + "px";
}

function wire() {
  ui.composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    // Before the page has drawn the conversation (or chosen the project and agent), the text stays
    // in the box and is sent once it has.
    if (!state.ready) {
      state.sendWhenReady = true;
      return;
    }
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
    // A passage link shows its source among the answer's citations (document name and snippet).
    const passage = ev.target.closest && ev.target.closest("a.passage-link");
    if (passage) {
      ev.preventDefault();
      const turn = passage.closest(".message-assistant") || document;
      const card = Array.from(turn.querySelectorAll(".passage-citation")).find(
        (c) => c.dataset.passageId === passage.dataset.passageId,
      );
      if (card) {
        card.classList.add("highlight");
        card.scrollIntoView({ block: "nearest" });
        window.setTimeout(() => card.classList.remove("highlight"), 1500);
      }
      return;
    }
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

async function init() {
  wire();
  setBusy(false);
  state.stickToBottom = true;
  connect(onFrame, onConnectionLost);
  await loadProjects();
  if (state.conversationId) {
    ui.picker.hidden = true;
    const [conv] = await Promise.all([loadConversation(), loadAgents(), loadConversations()]);
    state.historyLoaded = true;
    if (conv) {
      showServedModel();
      const agent = state.agents.find((a) => a.id === conv.agentDefinitionId);
      showAgentBadge(conv.agentDefinitionId ? (agent ? agent.name : "Agent") : "Plain chat");
      if (agent && agent.disabledReason) closeComposer(disabledAgentReason(agent));
    }
    subscribe();
  } else if (state.projectId) {
    setTitle("");
    await Promise.all([loadAgents(), loadConversations()]);
    renderPicker();
  }
  state.ready = true;
  document.body.dataset.ready = "true";
  ui.input.focus();
  if (state.sendWhenReady) ui.composer.requestSubmit();
  // A link to an entity from another page (a document's mentions): /chat/?project=<id>#entity-<id>.
  const linked = /^#entity-(.+)$/.exec(window.location.hash);
  if (linked && state.projectId) {
    try {
      openEntity(decodeURIComponent(linked[1]));
    } catch (err) {
      // A malformed link (a lone %): nothing to open.
    }
  }
}

init();
