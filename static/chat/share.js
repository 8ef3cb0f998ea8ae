// Export and share for the conversation on the chat page (docs/protocol.md §2 "export", "shares"):
// download links for Markdown and JSON, and the Share dialog: it makes read-only share links for the
// project's members (shown once: only a hash is stored) and lists the conversation's links with their
// status and expiry, each active one with Revoke. A module of its own beside chat.js: it follows the
// address (/chat/<id>/).

import { api, currentConversationId, el } from "./team-api.js";

const header = document.querySelector(".conversation-header");
const title = document.getElementById("conversation-title");

// The expiries offered when making a link (hours; "" is none), as POST …/shares takes them.
const EXPIRIES = [
  ["", "Never"],
  ["24", "In 1 day"],
  ["168", "In 7 days"],
  ["720", "In 30 days"],
];

function when(iso) {
  return new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

// What a link's row says of it: its state and, for an active one, how long it lasts.
function statusText(share) {
  if (share.status === "revoked") return `Revoked ${when(share.revokedAt)}`;
  if (share.status === "expired") return `Expired ${when(share.expiresAt)}`;
  return share.expiresAt ? `Active, expires ${when(share.expiresAt)}` : "Active, no expiry";
}

class ConversationTools {
  constructor() {
    this.markdown = el("a", { class: "btn btn-quiet small", id: "export-markdown", download: "", text: "Export Markdown" });
    this.json = el("a", { class: "btn btn-quiet small", id: "export-json", download: "", text: "JSON" });
    this.shareButton = el("button", { type: "button", class: "btn btn-quiet small", id: "share-button", text: "Share…" });
    this.box = el("span", { class: "conversation-tools", hidden: true }, this.markdown, this.json, this.shareButton);
    this.dialog = el("dialog", { id: "share-dialog", class: "dialog share-dialog", "aria-labelledby": "share-title" });
    document.body.append(this.dialog);
    header.append(this.box);
    this.shareButton.addEventListener("click", () => this.open());
    const sync = () => this.sync();
    new MutationObserver(sync).observe(title, { childList: true, characterData: true, subtree: true });
    window.addEventListener("popstate", sync);
    sync();
  }

  sync() {
    const cid = currentConversationId();
    this.box.hidden = !cid;
    if (!cid) return;
    this.markdown.href = `/api/chat/conversations/${cid}/export?format=markdown`;
    this.json.href = `/api/chat/conversations/${cid}/export?format=json`;
  }

  open() {
    const cid = currentConversationId();
    if (!cid) return;
    this.cid = cid;
    this.expiry = el("select", { id: "share-expiry" }, ...EXPIRIES.map(([value, label]) => el("option", { value, text: label })));
    this.create = el("button", { type: "button", class: "btn btn-primary", text: "Create link", onclick: () => this.createLink() });
    this.created = el("div", { class: "share-created" });
    this.problem = el("p", { role: "alert", class: "form-error", hidden: true });
    this.list = el("ul", { class: "share-list", "aria-labelledby": "share-list-title" });
    this.dialog.replaceChildren(
      el("h2", { id: "share-title", text: "Share read-only" }),
      el("p", { class: "muted small", text: "Members of this project who open a link can read this conversation, not continue it." }),
      el("div", { class: "share-new" }, el("label", { for: "share-expiry", text: "Expires" }), this.expiry, this.create),
      this.created,
      this.problem,
      el("h3", { id: "share-list-title", class: "share-list-title", text: "Links" }),
      this.list,
      el("div", { class: "dialog-actions" }, this.closeButton()),
    );
    if (!this.dialog.open) this.dialog.showModal();
    this.loadShares();
  }

  say(message) {
    this.problem.textContent = message || "";
    this.problem.hidden = !message;
  }

  async createLink() {
    this.say("");
    this.create.disabled = true;
    const body = this.expiry.value ? { expiresInHours: Number(this.expiry.value) } : {};
    let created;
    try {
      created = await api("POST", `/chat/conversations/${this.cid}/shares`, body);
    } catch (err) {
      this.say(err.message);
      return;
    } finally {
      this.create.disabled = false;
    }
    const link = el("input", { type: "text", readonly: true, value: created.url, "aria-label": "Share link", class: "share-link" });
    const copy = el("button", { type: "button", class: "btn btn-quiet", text: "Copy" });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(created.url);
        copy.textContent = "Copied";
      } catch {
        link.select();
      }
    });
    this.created.replaceChildren(
      el("div", { class: "share-link-row" }, link, copy),
      el("p", { class: "muted small", text: "Copy it now: the link is shown only this once." }),
    );
    link.select();
    await this.loadShares();
  }

  async loadShares() {
    let data;
    try {
      data = await api("GET", `/chat/conversations/${this.cid}/shares`);
    } catch (err) {
      this.say(err.message);
      return;
    }
    const items = data.items || [];
    if (!items.length) {
      this.list.replaceChildren(el("li", { class: "muted small share-none", text: "No links yet." }));
      return;
    }
    this.list.replaceChildren(...items.map((share) => this.row(share)));
    if (data.count > items.length) {
      this.list.append(el("li", { class: "muted small", text: `${data.count - items.length} older links not shown.` }));
    }
  }

  row(share) {
    const made = `Created ${when(share.createdAt)} by ${share.createdBy}`;
    const item = el(
      "li",
      { class: "share-item", "data-share-id": share.id, "data-status": share.status },
      el("span", { class: "share-made", text: made }),
      el("span", { class: "share-status", text: statusText(share) }),
    );
    if (share.status === "active") {
      const revoke = el("button", {
        type: "button",
        class: "btn btn-quiet small share-revoke",
        text: "Revoke",
        "aria-label": `Revoke the link ${made.toLowerCase()}`,
      });
      revoke.addEventListener("click", () => this.revoke(share, revoke));
      item.append(revoke);
    }
    return item;
  }

  async revoke(share, button) {
    this.say("");
    button.disabled = true;
    try {
      await api("DELETE", `/chat/conversations/${this.cid}/shares/${share.id}`);
    } catch (err) {
      button.disabled = false;
      this.say(err.message);
      return;
    }
    await this.loadShares();
  }

  closeButton() {
    return el("button", { type: "button", class: "btn btn-quiet", text: "Close", onclick: () => this.dialog.close() });
  }
}

if (header && title) new ConversationTools();
