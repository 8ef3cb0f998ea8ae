/*
 * The chat WebSocket (PROTOCOL.md §4, config.wsPath): one socket per page, reconnected with
 * jittered exponential backoff. A 4401 close means the session ended: the login page.
 *
 * send() is the one way the page speaks to the server (chat.message, chat.cancel, chat.approval,
 * chat.subscribe): what it is given waits in the outbox, in order, until a socket is open, so
 * nothing the page does before its socket connects, or while it reconnects, is dropped. On every
 * open the page subscribes to the conversation on screen first (afterSeq = the last frame seen),
 * then the outbox goes: a turn the server started from a queued message is followed from its
 * start, since a later subscribe would replace that follow. An outbox item may be a function,
 * called as it goes (it returns the message, or null for nothing): what it says is what the page
 * knows then, and the page learns the message left.
 */

import { config, state, ui } from "./state.js";

const socket = {
  ws: null,
  attempt: 0,
  timer: null,
  outbox: [],
  onFrame: () => {},
  onClose: () => {},
};

function setConnection(status, text) {
  ui.connection.dataset.state = status;
  ui.connection.textContent = text;
}

/* Open the socket; every frame with a string `type` goes to onFrame; onClose() is told when an
 * open socket closes (what was sent on it and not yet answered may not have arrived). */
export function connect(onFrame, onClose) {
  socket.onFrame = onFrame;
  socket.onClose = onClose || (() => {});
  open();
}

function open() {
  window.clearTimeout(socket.timer);
  const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + window.location.host + config.wsPath);
  socket.ws = ws;
  setConnection("connecting", socket.attempt ? "Reconnecting…" : "Connecting…");
  ws.addEventListener("open", () => {
    socket.attempt = 0;
    setConnection("open", "Connected");
    socket.outbox = [subscription, ...socket.outbox.filter((item) => item !== subscription)];
    flush();
  });
  ws.addEventListener("message", (event) => {
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch (_) {
      return;
    }
    if (frame && typeof frame.type === "string") socket.onFrame(frame);
  });
  ws.addEventListener("close", (event) => {
    if (socket.ws !== ws) return;
    socket.ws = null;
    if (event.code === 4401) {
      window.location.href = "/accounts/login/?next=" + encodeURIComponent(window.location.pathname);
      return;
    }
    const delay = Math.min(10000, 500 * 2 ** socket.attempt) * (0.75 + Math.random() * 0.5);
    socket.attempt += 1;
    setConnection("closed", "Reconnecting…");
    socket.timer = window.setTimeout(open, delay);
    socket.onClose();
  });
}

function flush() {
  const ws = socket.ws;
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  for (const item of socket.outbox.splice(0)) {
    const msg = typeof item === "function" ? item() : item;
    if (msg) ws.send(JSON.stringify(msg));
  }
}

/* Send a client message now, or as soon as a socket is open (in the order given). */
export function send(item) {
  socket.outbox.push(item);
  flush();
}

/* The subscription to the conversation on screen, replaying frames after the last one seen (none
 * before its history is drawn: its first subscribe comes then). */
function subscription() {
  if (!state.conversationId || !state.historyLoaded) return null;
  const afterSeq = state.turn ? state.turn.lastSeq : 0;
  return { type: "chat.subscribe", conversationId: state.conversationId, afterSeq };
}

/* Ask for the current turn of this conversation; while no socket is open, the next open asks. */
export function subscribe() {
  if (!socket.outbox.includes(subscription)) send(subscription);
}
