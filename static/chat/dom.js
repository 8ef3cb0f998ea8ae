/*
 * Small helpers of the chat page: making elements, announcing to screen readers, formatting
 * durations, dates and sizes, folded JSON blocks, and keeping the message list scrolled.
 */

import { state, ui } from "./state.js";

import { el } from "./el.js";

export { el };

export function announce(text) {
  ui.live.textContent = "";
  window.setTimeout(() => {
    ui.live.textContent = text;
  }, 30);
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
}

export function formatWhen(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleDateString([], { month: "short", day: "numeric" });
}

export function formatSize(chars) {
  if (chars < 1024) return `${chars} B`;
  return `${(chars / 1024).toFixed(1)} KB`;
}

export function safeJson(value) {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch (_) {
    return String(value);
  }
}

/* Pretty JSON in a <pre>; long values are folded behind a "show all" button. */
export function jsonBlock(value, label) {
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

export function parseMaybeJson(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch (_) {
    return text;
  }
}

export function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 120;
}

export function scrollToBottom(force) {
  if (force || state.stickToBottom) ui.messages.scrollTop = ui.messages.scrollHeight;
}
