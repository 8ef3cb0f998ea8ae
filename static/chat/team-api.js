// Small helpers shared by the chat page's issue-14 modules (search.js, answers.js, share.js):
// building elements and calling the REST API with the session (docs/protocol.md §2).

export const API = "/api";

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function cookie(name) {
  const row = document.cookie.split("; ").find((r) => r.startsWith(name + "="));
  return row ? decodeURIComponent(row.slice(name.length + 1)) : "";
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = cookie("csrftoken");
  const res = await fetch(API + path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) {
    const error = new Error((data && data.error) || `request failed (${res.status})`);
    error.status = res.status;
    error.code = data && data.code;
    throw error;
  }
  return data;
}

// The conversation the page shows: chat.js keeps it in the address (/chat/<id>/).
export function currentConversationId() {
  const m = window.location.pathname.match(/^\/chat\/([0-9a-f-]{36})\/$/);
  return m ? m[1] : null;
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
