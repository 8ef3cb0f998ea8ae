// Export and share for the conversation on the chat page (docs/protocol.md §2 "export", "shares"):
// download links for Markdown and JSON, and a button that makes a read-only share link for the
// project's members. A module of its own beside chat.js: it follows the address (/chat/<id>/).

import { api, currentConversationId, el } from "./team-api.js";

const header = document.querySelector(".conversation-header");
const title = document.getElementById("conversation-title");

class ConversationTools {
  constructor() {
    this.markdown = el("a", { class: "btn btn-quiet small", id: "export-markdown", download: "", text: "Export Markdown" });
    this.json = el("a", { class: "btn btn-quiet small", id: "export-json", download: "", text: "JSON" });
    this.shareButton = el("button", { type: "button", class: "btn btn-quiet small", id: "share-button", text: "Share…" });
    this.box = el("span", { class: "conversation-tools", hidden: true }, this.markdown, this.json, this.shareButton);
    this.dialog = el("dialog", { id: "share-dialog", class: "dialog", "aria-labelledby": "share-title" });
    document.body.append(this.dialog);
    header.append(this.box);
    this.shareButton.addEventListener("click", () => this.share());
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

  async share() {
    const cid = currentConversationId();
    if (!cid) return;
    this.dialog.replaceChildren(el("p", { class: "muted", text: "Making a link…" }));
    if (!this.dialog.open) this.dialog.showModal();
    let created;
    try {
      created = await api("POST", `/chat/conversations/${cid}/shares`, {});
    } catch (err) {
      this.dialog.replaceChildren(el("p", { role: "alert", text: err.message }), this.closeButton());
      return;
    }
    const link = el("input", { type: "text", readonly: true, value: created.url, "aria-label": "Share link", class: "share-link" });
    const copy = el("button", { type: "button", class: "btn btn-primary", text: "Copy" });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(created.url);
        copy.textContent = "Copied";
      } catch {
        link.select();
      }
    });
    this.dialog.replaceChildren(
      el("h2", { id: "share-title", text: "Share read-only" }),
      el("p", { class: "muted small", text: "Members of this project who open the link can read this conversation, not continue it. Revoke links through the API." }),
      link,
      el("div", { class: "dialog-actions" }, copy, this.closeButton()),
    );
    link.select();
  }

  closeButton() {
    return el("button", { type: "button", class: "btn btn-quiet", text: "Close", onclick: () => this.dialog.close() });
  }
}

if (header && title) new ConversationTools();
