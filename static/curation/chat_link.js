/*
 * The chat page's link to the graph page of the project on screen (#51), under "+ New chat" in the
 * conversations' sidebar (the topbar keeps its one row on a phone), whose address follows the
 * project (the open conversation's, or the one chosen in the project menu) as it is followed.
 */

import { state } from "../chat/state.js";

const link = document.createElement("a");
link.id = "graph-link";
link.className = "btn btn-quiet new-chat";
link.style.marginTop = "6px";
link.textContent = "Browse the graph";
link.title = "Browse this project's graph";
link.href = "#";

function follow() {
  const projectId = (state.conversation && state.conversation.projectId) || state.projectId;
  if (projectId) link.href = `/projects/${projectId}/graph`;
}

for (const event of ["pointerenter", "focus", "click"]) link.addEventListener(event, follow);
document.getElementById("new-chat").after(link);
