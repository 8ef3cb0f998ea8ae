/*
 * A graph change the agent proposed (the `approval_required` frame, or a pending Approval from
 * REST after a reload): the tool, the diff, and Approve / Reject with an optional reason. A member
 * who may not decide (a viewer) sees the card without the buttons, with a note. The decision goes
 * over the websocket (`chat.approval`); the `approval_decided` event (the answer to the decider,
 * and what every other tab watching the conversation gets) replaces the buttons with who decided,
 * and settles the tool chip of the waiting call.
 */

import { api } from "./api.js";
import { el } from "./dom.js";
import { send } from "./socket.js";

const cards = new Map();

function show(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function diffTable(diff) {
  const changes = Array.isArray(diff && diff.changes) ? diff.changes : [];
  const table = el("table", "approval-diff");
  const head = el("tr");
  ["Field", "Before", "After"].forEach((h) => head.appendChild(el("th", "", h)));
  table.appendChild(head);
  for (const c of changes) {
    const row = el("tr");
    row.appendChild(el("td", "approval-field", c.field));
    row.appendChild(el("td", "approval-before", show(c.before)));
    row.appendChild(el("td", "approval-after", show(c.after)));
    table.appendChild(row);
  }
  return table;
}

/* approval: {approvalId, tool, arguments, diff, expiresAt, canDecide}; onDecide(decision) is told;
 * chip: the ToolChip of the waiting call, if drawn. */
export function approvalCard(approval, onDecide, chip) {
  const card = el("section", "approval-card");
  card.dataset.approvalId = approval.approvalId;
  card.dataset.status = "pending";
  card.setAttribute("aria-label", "Proposed graph change");
  card.appendChild(el("div", "approval-title", "Proposed change: " + approval.tool));
  const summary = approval.diff && approval.diff.summary;
  if (summary) card.appendChild(el("p", "approval-summary", summary));
  card.appendChild(diffTable(approval.diff));
  const status = el("p", "approval-status muted small");
  if (approval.expiresAt) status.textContent = "Waiting for a decision until " + new Date(approval.expiresAt).toLocaleString() + ".";
  card.appendChild(status);
  if (approval.canDecide) {
    const reason = el("input", "approval-reason");
    reason.type = "text";
    reason.placeholder = "Reason (optional)";
    reason.setAttribute("aria-label", "Reason");
    reason.maxLength = 2000;
    const buttons = el("div", "approval-buttons");
    const approve = el("button", "btn btn-small btn-primary", "Approve");
    const reject = el("button", "btn btn-small", "Reject");
    for (const [button, decision] of [[approve, "approve"], [reject, "reject"]]) {
      button.type = "button";
      button.addEventListener("click", () => {
        approve.disabled = reject.disabled = reason.disabled = true;
        status.textContent = decision === "approve" ? "Approving…" : "Rejecting…";
        const msg = { type: "chat.approval", approvalId: approval.approvalId, decision };
        if (reason.value.trim()) msg.reason = reason.value.trim();
        if (onDecide) onDecide(decision);
        send(() => {
          card.dataset.sent = "true";
          return msg;
        });
      });
    }
    buttons.append(approve, reject);
    card.append(reason, buttons);
  } else {
    card.appendChild(el("p", "approval-note", "Only an editor or owner of this project can approve this change."));
  }
  if (chip) chip.awaitApproval();
  cards.set(approval.approvalId, { card, status, chip });
  return card;
}

function outcome(frame) {
  const by = frame.decidedBy ? " by " + frame.decidedBy : "";
  const result = frame.result || {};
  if (frame.status === "approved") return "Approved" + by + (result.error ? " — it could not run: " + result.error : ".");
  if (frame.status === "rejected") return "Rejected" + by + (frame.reason ? ": " + frame.reason : ".");
  if (frame.status === "expired") return "Expired: nobody decided in time; nothing was written.";
  return frame.status;
}

/* The `approval_decided` event (answer or announcement; a repeat changes nothing). */
export function approvalDecided(frame) {
  const entry = cards.get(frame.approvalId);
  if (!entry || entry.card.dataset.status === frame.status) return;
  entry.card.dataset.status = frame.status;
  entry.card.querySelectorAll("button, input, .approval-note").forEach((b) => b.remove());
  entry.status.textContent = outcome(frame);
  if (entry.chip) entry.chip.decided(frame.status, frame.result);
}

export function approvalRefused(frame) {
  for (const { card, status } of cards.values()) {
    if (card.dataset.status !== "pending") continue;
    const busy = card.querySelector("button:disabled");
    if (!busy) continue;
    reopen(card, status, frame);
  }
}

/* The socket closed: a decision that left on it and got no answer may not have arrived. Its card
 * offers the buttons again, and asks REST whether it was decided (its answer was what got lost):
 * then the card shows the outcome, as its approval_decided event would have. */
export function approvalsUnanswered(frame) {
  for (const [approvalId, { card, status }] of cards) {
    if (card.dataset.status !== "pending" || card.dataset.sent !== "true") continue;
    reopen(card, status, frame);
    api("GET", `/approvals/${approvalId}`)
      .then((a) => {
        if (a.status !== "pending") approvalDecided({ approvalId, ...a });
      })
      .catch(() => {
        /* the card keeps its buttons */
      });
  }
}

function reopen(card, status, frame) {
  delete card.dataset.sent;
  card.querySelectorAll("button, input").forEach((b) => (b.disabled = false));
  status.textContent = "Not decided: " + (frame.error || frame.code);
}
