// Small helpers shared by the chat page's issue-14 modules (search.js, answers.js, share.js):
// building elements (with props and children), the REST client of api.js, the shown conversation.

export { api } from "./api.js";

import { el } from "./el.js";

export { el };

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
