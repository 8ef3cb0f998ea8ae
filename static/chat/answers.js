// Feedback and usage on the chat page's answers (docs/protocol.md §2 "feedback", Message.usage):
// thumbs up/down (down asks for an optional comment) in each finished answer's actions, the
// tokens and cost of each answer (agent or plain), and the conversation's totals in its header. A module of
// its own beside chat.js: it watches #messages for answers chat.js marks with data-message-id.

import { api, currentConversationId, el } from "./team-api.js";

const messages = document.getElementById("messages");
const header = document.querySelector(".conversation-header");

function formatCost(cost) {
  if (cost === null || cost === undefined) return "";
  return cost >= 0.01 ? `$${cost.toFixed(2)}` : `$${cost.toPrecision(2)}`;
}

function usageText(u) {
  const cost = formatCost(u.cost);
  return `${u.inputTokens.toLocaleString()} in · ${u.outputTokens.toLocaleString()} out tokens${cost ? " · " + cost : ""}`;
}

class Answers {
  constructor() {
    this.conversationId = null;
    this.known = new Map(); // message id -> Message from REST
    this.loading = null;
    this.total = el("span", { id: "conversation-usage", class: "badge conversation-usage", hidden: true, title: "Tokens and cost of this conversation" });
    if (header) header.append(this.total);
    new MutationObserver(() => this.schedule()).observe(messages, {
      childList: true,
      subtree: true,
      attributes: true,
      attributeFilter: ["data-message-id", "data-state"],
    });
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.update();
    });
  }

  answers() {
    return Array.from(messages.querySelectorAll('.message-assistant[data-message-id][data-state="done"]'));
  }

  async update() {
    const cid = currentConversationId();
    if (cid !== this.conversationId) {
      this.conversationId = cid;
      this.known.clear();
      this.total.hidden = true;
    }
    if (!cid) return;
    const answers = this.answers();
    if (answers.some((a) => !this.known.has(a.dataset.messageId))) await this.load(cid);
    for (const article of answers) this.decorate(article);
  }

  async load(cid) {
    if (!this.loading) {
      this.loading = api("GET", `/chat/conversations/${cid}`)
        .then((c) => {
          if (cid !== this.conversationId) return;
          for (const m of c.messages) this.known.set(m.id, m);
          // An answer the server does not list (yet) is not asked for again on every change.
          for (const a of this.answers()) if (!this.known.has(a.dataset.messageId)) this.known.set(a.dataset.messageId, null);
          this.total.textContent = usageText(c.usage);
          this.total.hidden = c.usage.inputTokens + c.usage.outputTokens === 0;
        })
        .catch(() => {})
        .finally(() => {
          this.loading = null;
        });
    }
    await this.loading;
  }

  decorate(article) {
    const m = this.known.get(article.dataset.messageId);
    if (!m || !m.content || article.querySelector(".feedback-buttons")) return;
    const head = article.querySelector(".message-head");
    const actions = article.querySelector(".message-actions") || head;
    if (m.usage) head.insertBefore(el("span", { class: "message-usage small muted", text: usageText(m.usage) }), actions);
    const up = el("button", { type: "button", class: "icon-btn small feedback-up", "aria-label": "Good answer", title: "Good answer", text: "Good" });
    const down = el("button", { type: "button", class: "icon-btn small feedback-down", "aria-label": "Bad answer", title: "Bad answer", text: "Bad" });
    const box = el("span", { class: "feedback-buttons" }, up, down);
    actions.append(box);
    const show = (fb) => {
      m.feedback = fb;
      up.setAttribute("aria-pressed", String(!!fb && fb.rating === "up"));
      down.setAttribute("aria-pressed", String(!!fb && fb.rating === "down"));
    };
    show(m.feedback);
    const send = async (rating, comment) => {
      try {
        if (!rating) {
          await api("DELETE", `/chat/messages/${m.id}/feedback`);
          show(null);
        } else {
          const fb = await api("PUT", `/chat/messages/${m.id}/feedback`, { rating, comment: comment || "" });
          show({ rating: fb.rating, comment: fb.comment, updatedAt: fb.updatedAt });
        }
      } catch (err) {
        box.title = err.message;
      }
    };
    up.addEventListener("click", () => send(m.feedback && m.feedback.rating === "up" ? null : "up"));
    down.addEventListener("click", () => {
      if (m.feedback && m.feedback.rating === "down") return send(null);
      this.askComment(article, (comment) => send("down", comment));
    });
  }

  askComment(article, done) {
    if (article.querySelector(".feedback-form")) return;
    const text = el("textarea", { rows: "2", maxlength: "10000", "aria-label": "What was wrong? (optional)", placeholder: "What was wrong? (optional)" });
    const form = el("form", { class: "feedback-form" }, text);
    const cancel = el("button", { type: "button", class: "btn btn-quiet", text: "Cancel", onclick: () => form.remove() });
    form.append(el("div", { class: "dialog-actions" }, cancel, el("button", { type: "submit", class: "btn btn-primary", text: "Send feedback" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      done(text.value.trim());
      form.remove();
    });
    article.append(form);
    text.focus();
  }
}

if (messages) new Answers();
