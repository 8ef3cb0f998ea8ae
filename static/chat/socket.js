/*
 * The chat WebSocket (PROTOCOL.md §4, config.wsPath): one socket per page, reconnected with
 * jittered exponential backoff, with an outbox for what is sent while it is down. On every open it
 * subscribes to the conversation on screen (afterSeq = the last frame seen) and sends the outbox.
 * A 4401 close means the session ended: the login page.
 */

import { config, state, ui } from "./state.js";

const socket = {
  ws: null,
  attempt: 0,
  timer: null,
  outbox: [],
  onFrame: () => {},
};

function setConnection(status, text) {
  ui.connection.dataset.state = status;
  ui.connection.textContent = text;
}

/* Open the socket; every frame with a string `type` goes to onFrame. */
export function connect(onFrame) {
  socket.onFrame = onFrame;
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
    subscribe();
    const queued = socket.outbox.splice(0);
    queued.forEach((msg) => ws.send(JSON.stringify(msg)));
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
  });
}

export function wsSend(msg) {
  if (socket.ws && socket.ws.readyState === WebSocket.OPEN) socket.ws.send(JSON.stringify(msg));
  else socket.outbox.push(msg);
}

/* Ask for the current turn of this conversation, replaying frames after the last one seen. */
export function subscribe() {
  if (!state.conversationId || !state.historyLoaded) return;
  if (!socket.ws || socket.ws.readyState !== WebSocket.OPEN) return;
  const afterSeq = state.turn ? state.turn.lastSeq : 0;
  socket.ws.send(JSON.stringify({ type: "chat.subscribe", conversationId: state.conversationId, afterSeq }));
}
