// The project settings panel of the chat page: members, their roles, invitation links.
// A module of its own beside chat.js: it reads the selected project from #project-select and
// talks to the REST API only (docs/protocol.md §2, members and invitations).

import { api } from "./api.js";
import { config } from "./state.js";
import { el } from "./team-api.js";

const ROLES = ["owner", "editor", "viewer"];

function roleSelect(current, label, onChange) {
  const select = el("select", { "aria-label": label, class: "settings-role" });
  for (const role of ROLES) select.append(el("option", { value: role, text: role, selected: role === current }));
  select.addEventListener("change", () => onChange(select.value, select));
  return select;
}

class SettingsPanel {
  constructor(button) {
    this.button = button;
    this.projectSelect = document.getElementById("project-select");
    this.username = config.username;
    this.dialog = el("dialog", { id: "settings-dialog", class: "dialog settings-dialog", "aria-labelledby": "settings-title" });
    document.body.append(this.dialog);
    button.addEventListener("click", () => this.open());
    this.dialog.addEventListener("close", () => button.focus());
  }

  get projectId() {
    return this.projectSelect && !this.projectSelect.disabled ? this.projectSelect.value : "";
  }

  async open() {
    if (!this.projectId) return;
    this.dialog.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
    if (!this.dialog.open) this.dialog.showModal();
    await this.render();
  }

  async render(notice) {
    const pid = encodeURIComponent(this.projectId);
    let project, members, invitations = null;
    try {
      [project, members] = await Promise.all([api("GET", `/projects/${pid}`), api("GET", `/projects/${pid}/members`)]);
      if (project.role === "owner") invitations = await api("GET", `/projects/${pid}/invitations`);
    } catch (err) {
      this.dialog.replaceChildren(this.head("Project settings"), this.alert(err.message), this.closeRow());
      return;
    }
    const owner = project.role === "owner";
    this.dialog.replaceChildren(
      this.head(`${project.name} · settings`),
      el("p", { class: "muted small", text: `You are ${project.role} in this project.` }),
      notice ? el("p", { class: "settings-notice", role: "status", text: notice }) : null,
      el("p", { id: "settings-error", class: "form-error", role: "alert", hidden: true }),
      this.membersSection(members.items, owner),
      owner ? this.invitationsSection(invitations.items) : null,
      owner ? el("p", {}, el("a", { id: "usage-link", href: `/projects/${pid}/usage`, text: "Usage statistics" })) : null,
      this.closeRow(),
    );
  }

  head(title) {
    return el("h2", { id: "settings-title", text: title });
  }

  alert(message) {
    return el("p", { class: "form-error", role: "alert", text: message });
  }

  closeRow() {
    return el(
      "div",
      { class: "dialog-actions" },
      el("button", { type: "button", class: "btn btn-quiet", text: "Close", onclick: () => this.dialog.close() }),
    );
  }

  showError(message) {
    const box = this.dialog.querySelector("#settings-error");
    if (!box) return;
    box.textContent = message;
    box.hidden = false;
  }

  async act(work, notice) {
    try {
      await work();
    } catch (err) {
      this.showError(err.message);
      return;
    }
    if (notice === null) return;
    await this.render(notice);
  }

  membersSection(members, owner) {
    const pid = encodeURIComponent(this.projectId);
    const list = el("ul", { class: "settings-list", "aria-label": "Members" });
    for (const m of members) {
      const me = m.username === this.username;
      const name = el("span", { class: "settings-name", text: m.displayName + (me ? " (you)" : "") });
      if (m.displayName !== m.username) name.title = m.username;
      const role = owner
        ? roleSelect(m.role, `Role of ${m.username}`, (value, select) =>
            this.act(async () => {
              try {
                await api("PATCH", `/projects/${pid}/members/${m.userId}`, { role: value });
              } catch (err) {
                select.value = m.role;
                throw err;
              }
            }, `${m.username} is now ${value}.`),
          )
        : el("span", { class: "badge", text: m.role });
      const removable = owner || me;
      const remove = removable
        ? el("button", {
            type: "button",
            class: "btn btn-small btn-quiet",
            text: me ? "Leave" : "Remove",
            "aria-label": me ? "Leave this project" : `Remove ${m.username}`,
            onclick: () =>
              this.act(async () => {
                if (!window.confirm(me ? "Leave this project?" : `Remove ${m.username} from this project?`)) return;
                await api("DELETE", `/projects/${pid}/members/${m.userId}`);
                if (me) window.location.assign("/chat/");
              }, `${m.username} was removed.`),
          })
        : null;
      list.append(el("li", { class: "settings-row", "data-username": m.username }, name, role, remove));
    }
    return el(
      "section",
      { "aria-labelledby": "settings-members" },
      el("h3", { id: "settings-members", text: `Members (${members.length})` }),
      list,
      owner ? this.addForm() : null,
    );
  }

  // Add an existing user by username or e-mail. Something shaped like an address is tried as an
  // e-mail first, then as a username (usernames may contain "@").
  addForm() {
    const pid = encodeURIComponent(this.projectId);
    const who = el("input", { type: "text", class: "settings-link", "aria-label": "Username or e-mail", placeholder: "Username or e-mail", required: true });
    const role = roleSelect("viewer", "Role for the new member", () => {});
    const form = el("form", { class: "settings-row" }, who, role, el("button", { type: "submit", class: "btn btn-small", text: "Add" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = who.value.trim();
      if (!value) return;
      this.act(async () => {
        const looksLikeEmail = /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(value);
        try {
          await api("POST", `/projects/${pid}/members`, looksLikeEmail ? { email: value, role: role.value } : { username: value, role: role.value });
        } catch (err) {
          if (!(looksLikeEmail && err.code === "user_not_found")) throw err;
          await api("POST", `/projects/${pid}/members`, { username: value, role: role.value });
        }
      }, `${value} was added as ${role.value}.`);
    });
    return form;
  }

  invitationsSection(invitations) {
    const pid = encodeURIComponent(this.projectId);
    const role = roleSelect(this.inviteRole || "viewer", "Role for the invited person", (value) => {
      this.inviteRole = value;
    });
    const link = el("input", { id: "invite-link", class: "settings-link", readonly: true, "aria-label": "Invitation link", hidden: true });
    const copy = el("button", { type: "button", class: "btn btn-small", text: "Copy", hidden: true });
    copy.addEventListener("click", async () => {
      link.select();
      try {
        await navigator.clipboard.writeText(link.value);
        copy.textContent = "Copied";
      } catch (_) {
        copy.textContent = "Press Ctrl+C to copy";
      }
    });
    const create = el("button", {
      type: "button",
      class: "btn btn-primary btn-small",
      text: "Create invite link",
      onclick: () =>
        this.act(async () => {
          const created = await api("POST", `/projects/${pid}/invitations`, { role: role.value });
          await this.render(`Invite link for a new ${created.role} created: it works once, until ${new Date(created.expiresAt).toLocaleString()}.`);
          const input = this.dialog.querySelector("#invite-link");
          const button = input.nextElementSibling;
          input.value = created.url;
          input.hidden = false;
          button.hidden = false;
          input.select();
        }, null),
    });
    const pending = invitations.filter((i) => i.status === "pending");
    const list = el("ul", { class: "settings-list", "aria-label": "Pending invitations" });
    for (const inv of pending) {
      list.append(
        el(
          "li",
          { class: "settings-row" },
          el("span", { class: "settings-name", text: `${inv.role} · by ${inv.createdBy || "?"} · until ${new Date(inv.expiresAt).toLocaleDateString()}` }),
          el("button", {
            type: "button",
            class: "btn btn-small btn-quiet",
            text: "Revoke",
            "aria-label": `Revoke the ${inv.role} invitation`,
            onclick: () => this.act(() => api("DELETE", `/projects/${pid}/invitations/${inv.id}`), "Invitation revoked."),
          }),
        ),
      );
    }
    return el(
      "section",
      { "aria-labelledby": "settings-invitations" },
      el("h3", { id: "settings-invitations", text: "Invite by link" }),
      el("div", { class: "settings-row" }, role, create),
      el("div", { class: "settings-row" }, link, copy),
      pending.length ? list : el("p", { class: "muted small", text: "No pending invitations." }),
    );
  }
}

const button = document.getElementById("settings-button");
if (button) new SettingsPanel(button);
