// Conversation search in the sidebar (docs/protocol.md §2 "Search"): a search box above the
// conversation list; while it holds text, matching conversations (with their highlighted
// snippet) replace the list. A module of its own beside chat.js: it only reads the project select.

import { api, debounce, el } from "./team-api.js";

class ConversationSearch {
  constructor(list) {
    this.list = list;
    this.empty = document.getElementById("conversation-empty");
    this.projectSelect = document.getElementById("project-select");
    this.input = el("input", {
      type: "search",
      id: "conversation-search",
      class: "conversation-search",
      placeholder: "Search conversations",
      "aria-label": "Search conversations",
      maxlength: "1000",
      autocomplete: "off",
    });
    this.status = el("p", { class: "muted small search-status", role: "status", "aria-live": "polite" });
    this.results = el("ul", { id: "search-results", class: "conversation-list search-results", hidden: true });
    list.before(this.input, this.status);
    list.after(this.results);
    this.seq = 0;
    const run = debounce(() => this.search(), 250);
    this.input.addEventListener("input", run);
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Escape") {
        this.input.value = "";
        this.search();
      }
    });
    if (this.projectSelect) this.projectSelect.addEventListener("change", () => this.input.value.trim() && this.search());
  }

  showList(searching) {
    this.list.hidden = searching;
    this.results.hidden = !searching;
    if (this.empty) this.empty.hidden = searching || this.list.children.length > 0;
  }

  async search() {
    const q = this.input.value.trim();
    const seq = ++this.seq;
    if (!q) {
      this.showList(false);
      this.results.replaceChildren();
      this.status.textContent = "";
      return;
    }
    const params = new URLSearchParams({ q, limit: "50" });
    if (this.projectSelect && !this.projectSelect.disabled && this.projectSelect.value) params.set("projectId", this.projectSelect.value);
    let body;
    try {
      body = await api("GET", `/chat/conversations?${params}`);
    } catch (err) {
      if (seq !== this.seq) return;
      this.status.textContent = err.message;
      return;
    }
    if (seq !== this.seq) return; // a newer search has started
    this.results.replaceChildren(...body.items.map((c) => this.item(c)));
    this.status.textContent = body.count ? `${body.count} found` : "No conversations match.";
    this.showList(true);
  }

  item(c) {
    const link = el("a", { class: "conversation-link search-hit", href: `/chat/${c.id}/` });
    link.append(el("span", { class: "conversation-name", text: (c.title || "").trim() || "Untitled conversation" }));
    const snippet = el("span", { class: "search-snippet small" });
    // The server escapes the snippet; its only markup is <mark> around matched words.
    snippet.innerHTML = c.snippet;
    link.append(snippet);
    return el("li", { class: "conversation-item", "data-conversation-id": c.id }, link);
  }
}

const list = document.getElementById("conversation-list");
if (list) new ConversationSearch(list);
