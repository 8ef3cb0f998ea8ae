/*
 * A tool call of an answer, drawn as a <details class="tool-chip"> with data-call-id, data-tool and
 * data-status (started → completed | error); opening it shows the input and the result or error.
 * A write call that waits for a member's decision is `awaiting` (no spinner), then `completed`
 * (approved and written), `error` (approved but it could not run), `declined` or `expired`.
 */

import { el, formatDuration, jsonBlock } from "./dom.js";

const CHIP_WORDS = {
  started: " running",
  completed: " done",
  error: " failed",
  awaiting: " awaiting approval",
  declined: " declined",
  expired: " expired",
};

export class ToolChip {
  constructor(call, live) {
    this.callId = call.callId || call.id || "";
    this.name = call.tool || call.name || "tool";
    this.input = call.input;
    this.result = undefined;
    this.error = null;
    this.startedAt = live ? performance.now() : null;
    this.el = el("details", "tool-chip");
    this.el.dataset.callId = this.callId;
    this.el.dataset.tool = this.name;
    const summary = el("summary");
    this.statusIcon = el("span", "tool-status");
    this.statusIcon.setAttribute("aria-hidden", "true");
    this.statusText = el("span", "visually-hidden");
    summary.appendChild(this.statusIcon);
    summary.appendChild(el("span", "tool-name", this.name));
    summary.appendChild(this.statusText);
    this.durationEl = el("span", "tool-duration");
    summary.appendChild(this.durationEl);
    this.el.appendChild(summary);
    this.detail = el("div", "tool-detail");
    this.el.appendChild(this.detail);
    this.setStatus("started");
    this.renderDetail();
  }

  setStatus(status, durationMs) {
    this.status = status;
    this.el.dataset.status = status;
    this.statusText.textContent = CHIP_WORDS[status] || "";
    this.el.title = status === "awaiting" ? "Awaiting approval" : "";
    if (durationMs !== undefined && durationMs !== null) this.durationEl.textContent = formatDuration(durationMs);
  }

  complete(result, durationMs) {
    this.result = result;
    const elapsed = durationMs !== undefined ? durationMs : this.startedAt !== null ? performance.now() - this.startedAt : null;
    this.setStatus("completed", elapsed);
    this.renderDetail();
  }

  fail(error, durationMs) {
    this.error = error || "tool error";
    const elapsed = durationMs !== undefined ? durationMs : this.startedAt !== null ? performance.now() - this.startedAt : null;
    this.setStatus("error", elapsed);
    this.renderDetail();
  }

  /* A write call paused for approval: it waits, it does not run. */
  awaitApproval() {
    this.setStatus("awaiting");
    this.renderDetail();
  }

  /* The decision on the approval this chip waited for (the approval_decided event). */
  decided(status, result) {
    const error = result && result.error ? result.error : null;
    if (status === "approved" && !error) this.complete(result, null);
    else if (status === "approved") this.fail(error, null);
    else {
      this.error = error || status;
      this.setStatus(status === "rejected" ? "declined" : "expired");
      this.renderDetail();
    }
  }

  renderDetail() {
    this.detail.replaceChildren();
    this.detail.appendChild(jsonBlock(this.input === undefined ? {} : this.input, "Input"));
    if (this.error) {
      const err = el("div", "tool-error");
      err.appendChild(el("div", "json-label", "Error"));
      err.appendChild(el("pre", "json", String(this.error)));
      this.detail.appendChild(err);
    } else if (this.result !== undefined) {
      this.detail.appendChild(jsonBlock(this.result, "Result"));
    } else {
      const waiting = this.status === "awaiting" ? "Awaiting approval: nothing is written until a member approves." : "Waiting for the result…";
      this.detail.appendChild(el("p", "muted small", waiting));
    }
  }
}
