/*
 * The curation queues page (#51): "Propose merge" on a duplicate pair posts the pair's proposal
 * (its {"changes": [{"action": "merge_entities", "args": {"keep", "merge"}}]}, rendered by the server
 * beside the button) to POST /api/projects/{id}/curation/change-sets, and says what came of it: a
 * change set waiting for a second member's review, or the server's {error, code}.
 */

function csrfToken() {
  const input = document.querySelector("input[name='csrfmiddlewaretoken']");
  return input ? input.value : "";
}

async function proposeMerge(button) {
  const row = button.closest("tr");
  const status = row.querySelector(".merge-status");
  const proposal = JSON.parse(row.querySelector("script[type='application/json']").textContent);
  const projectId = document.getElementById("queue").dataset.projectId;
  const a = row.querySelector("td a").textContent;
  button.disabled = true;
  status.dataset.state = "busy";
  status.textContent = "Proposing…";
  let res;
  let data = null;
  try {
    res = await fetch(`/api/projects/${projectId}/curation/change-sets`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify({ ...proposal, summary: `Merge duplicates (from the queue): ${a}` }),
    });
    data = await res.json().catch(() => null);
  } catch (err) {
    status.dataset.state = "error";
    status.textContent = `Could not reach the server: ${err.message}`;
    button.disabled = false;
    return;
  }
  if (res.ok) {
    status.dataset.state = "done";
    const id = data && data.id ? ` ${String(data.id).slice(0, 8)}` : "";
    const state = data && data.status ? data.status : "proposed";
    status.textContent = `Proposed: change set${id} (${state}); a second member reviews it.`;
    row.dataset.proposed = data && data.id ? data.id : "true";
    return;
  }
  status.dataset.state = "error";
  if (res.status === 404 && (!data || data.code === "not_found")) {
    status.textContent = "This server cannot propose merges yet (no curation change sets).";
  } else {
    status.textContent = (data && data.error) || `The proposal failed (${res.status}).`;
  }
  button.disabled = false;
}

document.addEventListener("click", (event) => {
  const button = event.target.closest(".propose-merge");
  if (button) proposeMerge(button);
});

/* The change sets tab: Approve, Reject and Undo post part A's routes (the decision, the undo) with
 * the body the server rendered on the button, then show the page again, or the server's error. */
async function act(button) {
  const status = button.closest("td").querySelector(".merge-status");
  button.disabled = true;
  status.dataset.state = "busy";
  status.textContent = "…";
  const res = await fetch(button.dataset.url, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken() },
    body: button.dataset.body,
  }).catch((err) => ({ ok: false, status: 0, json: async () => ({ error: err.message }) }));
  if (res.ok) {
    window.location.reload();
    return;
  }
  const data = await res.json().catch(() => null);
  status.dataset.state = "error";
  status.textContent = (data && data.error) || `Refused (${res.status}).`;
  button.disabled = false;
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.act");
  if (button) act(button);
});
