/*
 * What the parts of the chat page share: the page's configuration (the json_script "chat-config"),
 * its elements by role, and the state of the conversation on screen. A module is evaluated once per
 * page, so every module that imports these (a later one too, e.g. a settings panel) sees the same objects.
 */

export const config = JSON.parse(document.getElementById("chat-config").textContent);
const $ = (id) => document.getElementById(id);
export const ui = {
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
  composerNotice: $("composer-notice"),
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

export const state = {
  projectId: null,
  projects: [],
  agents: [],
  agentsLoaded: false,
  selectedAgentId: null,
  conversationId: config.conversationId || null,
  conversation: null,
  historyLoaded: !config.conversationId,
  ready: false, // the page has loaded what it shows (projects, agents, history): a message may go
  sendWhenReady: false, // Send was pressed before that: the box's text goes once it is ready
  answered: new Set(), // user message ids whose answer is already drawn
  decidedCalls: new Map(), // tool call id → its approval_decided event (the chip of its outcome)
  pausedTurns: new Map(), // approval id → the turn view that waits for it (drawn from history)
  resuming: false, // a decision was sent: its continuation turn answers an answered message
  userMessages: new Map(), // user message id → text
  turn: null, // the live turn bound to a meta frame
  pending: null, // the turn I started, waiting for its meta frame
  ignoring: false, // replayed frames of a turn already drawn from history
  pendingCancel: false,
  busy: false, // a turn of mine or of this conversation is running: Stop shows instead of Send
  closedReason: null, // why nothing can be sent here (the conversation's agent is disabled)
  stickToBottom: true, // the reader is at the end of the messages: new text scrolls into view
};
