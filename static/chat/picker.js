/*
 * The project select in the top bar and, on a new chat, the picker of who answers: the project's
 * agent definitions (the default first chosen) or plain chat. The chosen project is remembered.
 * A definition an operator disabled (its `disabledReason`) is shown greyed out with the reason and
 * cannot be chosen: a conversation with it would be refused (409 agent_definition_disabled).
 */

import { api } from "./api.js";
import { el, announce } from "./dom.js";
import { config, state, ui } from "./state.js";

export async function loadProjects() {
  let data;
  try {
    data = await api("GET", "/projects");
  } catch (err) {
    ui.projectSelect.replaceChildren(el("option", null, "Projects unavailable"));
    announce(err.message);
    return;
  }
  state.projects = data.items || [];
  ui.projectSelect.replaceChildren();
  if (!state.projects.length) {
    ui.projectSelect.appendChild(el("option", null, "No projects"));
    ui.projectSelect.disabled = true;
    ui.messages.replaceChildren(el("p", "empty-state", "You are not a member of any project yet. Ask a project owner to add you."));
    return;
  }
  for (const p of state.projects) {
    const option = el("option", null, p.name);
    option.value = p.id;
    ui.projectSelect.appendChild(option);
  }
  const remembered = window.localStorage.getItem("kgchat.projectId");
  const ids = state.projects.map((p) => p.id);
  state.projectId =
    (config.projectId && ids.includes(config.projectId) && config.projectId) ||
    (remembered && ids.includes(remembered) && remembered) ||
    ids[0];
  ui.projectSelect.value = state.projectId;
  ui.projectSelect.disabled = false;
  window.localStorage.setItem("kgchat.projectId", state.projectId);
}

let agentsAsked = 0;

/* The agents of the project on screen. An answer that comes back after the project changed again
 * (a quick second change) is dropped: the picker shows the agents of the project now chosen. */
export async function loadAgents() {
  const asked = ++agentsAsked;
  const projectId = state.projectId;
  let agents = [];
  try {
    const data = await api("GET", `/projects/${projectId}/agent-definitions`);
    agents = (data && (data.items || data)) || [];
  } catch (_) {
    agents = [];
  }
  if (asked !== agentsAsked || projectId !== state.projectId) return;
  state.agents = agents;
  state.agentsLoaded = true;
}

export function renderPicker() {
  ui.pickerList.replaceChildren();
  const options = state.agents.map((a) => ({
    id: a.id,
    name: a.name,
    description: a.description || "Agent with graph tools",
    disabledReason: a.disabledReason || null,
  }));
  options.push({ id: "", name: "Plain chat", description: "Search the graph once, then answer — no tool loop.", disabledReason: null });
  const usable = options.filter((o) => !o.disabledReason);
  const preferred = state.agents.find((a) => a.isDefault && !a.disabledReason) || usable[0];
  if (state.selectedAgentId === null || !usable.some((o) => o.id === state.selectedAgentId)) {
    state.selectedAgentId = preferred ? preferred.id : "";
  }
  options.forEach((o, k) => {
    const label = el("label", "agent-option");
    const input = el("input");
    input.type = "radio";
    input.name = "agent";
    input.value = o.id;
    input.id = "agent-option-" + k;
    input.checked = o.id === state.selectedAgentId;
    input.addEventListener("change", () => {
      state.selectedAgentId = input.value;
    });
    const text = el("span", "agent-option-text");
    text.appendChild(el("span", "agent-option-name", o.name));
    text.appendChild(el("span", "agent-option-desc", o.description));
    if (o.disabledReason) {
      input.disabled = true;
      label.classList.add("disabled");
      const reason = el("span", "agent-option-disabled", "Disabled: " + o.disabledReason);
      reason.id = "agent-option-reason-" + k;
      input.setAttribute("aria-describedby", reason.id);
      text.appendChild(reason);
    }
    label.appendChild(input);
    label.appendChild(text);
    ui.pickerList.appendChild(label);
  });
  ui.picker.hidden = false;
}
