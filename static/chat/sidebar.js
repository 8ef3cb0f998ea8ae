/*
 * The sidebar: the project's conversations (PROTOCOL.md §2 /chat/conversations), newest first,
 * each a link with rename and delete; the page title; and the sidebar's open/closed state on
 * narrow screens.
 */

import { api } from "./api.js";
import { el, announce, formatWhen } from "./dom.js";
import { state, ui } from "./state.js";

let listAsked = 0;

/* The project's conversations in the sidebar; an answer for a project no longer chosen is dropped. */
export async function loadConversations() {
  if (!state.projectId) return;
  const asked = ++listAsked;
  const projectId = state.projectId;
  let data;
  try {
    data = await api("GET", `/chat/conversations?projectId=${encodeURIComponent(projectId)}`);
  } catch (_) {
    return;
  }
  if (asked !== listAsked || projectId !== state.projectId) return;
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

export function setTitle(title) {
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

export function toggleSidebar(open) {
  const show = open === undefined ? !document.body.classList.contains("sidebar-open") : open;
  document.body.classList.toggle("sidebar-open", show);
  ui.sidebarToggle.setAttribute("aria-expanded", show ? "true" : "false");
  ui.backdrop.hidden = !show;
  if (show) {
    const first = ui.sidebar.querySelector("a, button");
    if (first) first.focus();
  }
}
