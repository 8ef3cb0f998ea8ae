// Documents on the chat page (docs/protocol.md §2 "documents", "extraction", "change sets"): the
// Documents dialog uploads a file (text, Markdown, HTML, PDF), lists the project's documents, starts
// an extraction, shows its progress while the background worker asks the model passage by passage,
// then the change set to review: approve all, approve or reject the selected items, edit an entity's
// name or type before approving; each document links to its mentions' page. A module of its own beside chat.js, using only the REST routes.

import { api, el } from "./team-api.js";
import { config } from "./state.js";

const POLL_MS = 1000;

function cookie(name) {
  const row = document.cookie.split("; ").find((r) => r.startsWith(name + "="));
  return row ? decodeURIComponent(row.slice(name.length + 1)) : "";
}

async function upload(projectId, file) {
  const body = new FormData();
  body.append("file", file, file.name);
  const res = await fetch(`${config.apiBase}/projects/${encodeURIComponent(projectId)}/documents`, {
    method: "POST",
    body,
    credentials: "same-origin",
    headers: { Accept: "application/json", "X-CSRFToken": cookie("csrftoken") },
  });
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new Error((data && data.error) || `upload failed (${res.status})`);
  return data;
}

function evidenceText(item) {
  const ev = item.evidence || {};
  if (!ev.entity) return "";
  if (ev.method === "name") return `same name as ${ev.entity.name} (${ev.entity.type})`;
  return `like ${ev.entity.name} (${ev.entity.type}), ${ev.method} ${ev.score}`;
}

class DocumentsPanel {
  constructor() {
    this.projectSelect = document.getElementById("project-select");
    this.button = el("button", { type: "button", id: "documents-button", class: "btn btn-quiet", "aria-haspopup": "dialog", "aria-label": "Documents", title: "Documents", text: "Documents" });
    document.getElementById("settings-button").after(this.button);
    this.dialog = el("dialog", { id: "documents-dialog", class: "dialog documents-dialog", "aria-labelledby": "documents-title" });
    document.body.append(this.dialog);
    this.button.addEventListener("click", () => this.open());
    this.dialog.addEventListener("close", () => this.stopPolling());
  }

  get projectId() {
    return this.projectSelect && !this.projectSelect.disabled ? this.projectSelect.value : "";
  }

  async open() {
    if (!this.projectId) return;
    this.file = el("input", { type: "file", id: "document-file", accept: ".txt,.md,.markdown,.html,.htm,.pdf,.docx,.pptx,.xlsx,.csv,.png,.jpg,.jpeg" });
    this.uploadButton = el("button", { type: "button", class: "btn btn-primary", id: "document-upload", text: "Upload", onclick: () => this.upload() });
    this.status = el("p", { id: "documents-status", class: "muted small", role: "status" });
    this.problem = el("p", { id: "documents-error", class: "form-error", role: "alert", hidden: true });
    this.list = el("ul", { id: "document-list", class: "document-list" });
    this.review = el("section", { id: "change-set", class: "change-set", hidden: true });
    this.dialog.replaceChildren(
      el("h2", { id: "documents-title", text: "Documents" }),
      el("div", { class: "document-upload" }, el("label", { for: "document-file", text: "Text, Markdown, HTML, PDF (scans too), Word, PowerPoint, Excel, CSV or an image" }), this.file, this.uploadButton),
      this.status,
      this.problem,
      this.list,
      this.review,
      el("div", { class: "dialog-actions" }, el("button", { type: "button", class: "btn btn-quiet", text: "Close", onclick: () => this.dialog.close() })),
    );
    if (!this.dialog.open) this.dialog.showModal();
    await this.loadDocuments();
  }

  say(message) {
    this.problem.textContent = message || "";
    this.problem.hidden = !message;
  }

  async upload() {
    const file = this.file.files && this.file.files[0];
    if (!file) return this.say("Choose a file first.");
    this.say("");
    this.status.textContent = `Uploading ${file.name}…`;
    try {
      const done = await upload(this.projectId, file);
      this.status.textContent = done.changed
        ? `${done.document.name}: ${done.passagesAdded} new passage(s), ${done.passagesKept} kept, ${done.passagesRemoved} removed.`
        : `${done.document.name}: unchanged, nothing to do.`;
      this.file.value = "";
    } catch (err) {
      this.status.textContent = "";
      this.say(err.message);
    }
    await this.loadDocuments();
  }

  async loadDocuments() {
    const pid = encodeURIComponent(this.projectId);
    try {
      const docs = await api("GET", `/projects/${pid}/documents`);
      this.list.replaceChildren(...docs.items.map((d) => this.documentRow(d)));
      if (!docs.items.length) this.list.append(el("li", { class: "muted small", text: "No documents yet." }));
    } catch (err) {
      this.say(err.message);
    }
  }

  documentRow(doc) {
    const extract = el("button", { type: "button", class: "btn btn-small", text: "Extract", onclick: () => this.extract(doc) });
    const show = el("button", { type: "button", class: "btn btn-small btn-quiet", text: "Review", onclick: () => this.show(doc) });
    const mentions = el("a", {
      class: "btn btn-small btn-quiet document-mentions",
      href: `/projects/${encodeURIComponent(this.projectId)}/documents/${encodeURIComponent(doc.id)}/mentions`,
      text: "Mentions",
    });
    // A presentation's pages are its slides, a workbook's its sheets (#50).
    const unit = { pptx: "slides", xlsx: "sheets" }[doc.format] || "pages";
    const pages = doc.pages ? `, ${doc.pages} ${unit}` : "";
    return el(
      "li",
      { class: "document-row", "data-document-id": doc.id },
      el("span", { class: "document-name", text: doc.name }),
      el("span", { class: "muted small", text: ` ${doc.format}${pages}, ${doc.passages} passages` }),
      extract,
      show,
      mentions,
    );
  }

  async extract(doc) {
    this.say("");
    try {
      const set = await api("POST", `/projects/${encodeURIComponent(this.projectId)}/documents/${doc.id}/extraction`);
      this.document = doc;
      this.renderSet(set);
    } catch (err) {
      this.say(err.message);
    }
  }

  async show(doc) {
    this.say("");
    this.document = doc;
    try {
      this.renderSet(await api("GET", `/projects/${encodeURIComponent(this.projectId)}/documents/${doc.id}/extraction`));
    } catch (err) {
      this.say(err.code === "change_set_not_found" ? `${doc.name} has not been extracted yet.` : err.message);
    }
  }

  stopPolling() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  poll(set) {
    this.stopPolling();
    this.timer = setTimeout(async () => {
      try {
        this.renderSet(await api("GET", `/change-sets/${set.id}`));
      } catch (err) {
        this.say(err.message);
      }
    }, POLL_MS);
  }

  renderSet(set) {
    this.set = set;
    this.review.hidden = false;
    const p = set.progress;
    const progress = el("p", {
      id: "extraction-progress",
      class: "extraction-progress",
      role: "status",
      "data-status": set.status,
      text: `${set.documentName}: ${p.done + p.failed} of ${p.total} passages read${p.failed ? ` (${p.failed} failed)` : ""} · ${set.status}`,
    });
    if (set.status === "running") {
      this.review.replaceChildren(el("h3", { text: "Extraction" }), progress);
      this.poll(set);
      return;
    }
    this.stopPolling();
    const rows = set.items.map((item) => this.itemRow(item));
    const pending = set.items.some((i) => i.status === "pending");
    this.review.replaceChildren(
      el("h3", { text: "Proposed changes" }),
      progress,
      el("ul", { id: "change-set-items", class: "change-set-items" }, ...rows),
      pending
        ? el(
            "div",
            { class: "change-set-actions" },
            el("button", { type: "button", class: "btn btn-primary", id: "approve-selected", text: "Approve selected", onclick: () => this.decide("selected") }),
            el("button", { type: "button", class: "btn btn-danger", id: "reject-selected", text: "Reject selected", onclick: () => this.decide("reject") }),
            el("button", { type: "button", class: "btn", id: "approve-all", text: "Approve all", onclick: () => this.decide("all") }),
          )
        : null,
    );
  }

  itemRow(item) {
    const row = el("li", { class: "change-item", "data-item-id": String(item.id), "data-status": item.status, "data-action": item.action });
    const pending = item.status === "pending";
    row.append(el("input", { type: "checkbox", class: "item-select", "aria-label": `Select item ${item.id}`, disabled: !pending }));
    row.append(el("span", { class: "item-action", text: item.action.replace("_", " ") }));
    if (item.action === "create_relationship") {
      row.append(el("span", { class: "item-text", text: `${item.values.sourceName} -${item.values.type}-> ${item.values.targetName}` }));
    } else if (pending) {
      row.append(
        el("input", { type: "text", class: "item-name", value: item.values.name, "aria-label": `Name of item ${item.id}` }),
        el("input", { type: "text", class: "item-type", value: item.values.type, "aria-label": `Type of item ${item.id}` }),
      );
    } else {
      row.append(el("span", { class: "item-text", text: `${item.values.name} (${item.values.type})` }));
    }
    const evidence = evidenceText(item);
    if (evidence) row.append(el("span", { class: "item-evidence muted small", text: evidence }));
    row.append(el("span", { class: "item-status badge", text: item.status }));
    if (item.result && item.result.error) row.append(el("span", { class: "form-error small", text: item.result.error }));
    return row;
  }

  async decide(how) {
    const selected = [];
    const edits = {};
    for (const row of this.review.querySelectorAll(".change-item")) {
      const id = Number(row.dataset.itemId);
      const box = row.querySelector(".item-select");
      if (box && box.checked) selected.push(id);
      const item = this.set.items.find((i) => i.id === id);
      const name = row.querySelector(".item-name");
      const type = row.querySelector(".item-type");
      if (item && name && type && (name.value !== item.values.name || type.value !== item.values.type)) {
        edits[id] = { name: name.value, type: type.value };
      }
    }
    const body = how === "all" ? { approve: "all", edits } : how === "reject" ? { reject: selected, edits } : { approve: selected, edits };
    try {
      this.renderSet(await api("POST", `/change-sets/${this.set.id}/decision`, body));
      this.say("");
    } catch (err) {
      this.say(err.message);
    }
  }
}

function start() {
  if (document.getElementById("settings-button")) new DocumentsPanel();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
