/*
 * The REST client of the chat page (PROTOCOL.md §2, under config.apiBase): JSON in and out, the
 * CSRF token on writes, the login page on 401, and an ApiError with the answer's {error, code}.
 */

import { config } from "./state.js";

function cookie(name) {
  const row = document.cookie.split("; ").find((r) => r.startsWith(name + "="));
  return row ? decodeURIComponent(row.slice(name.length + 1)) : "";
}

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
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
