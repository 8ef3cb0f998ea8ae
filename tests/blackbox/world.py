"""What the black-box tests are made of, as an operator and users make it: users added in the
Django admin, project "Atlas" with its members, graph and agents over REST."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.blackbox.clients import PASSWORD, Api, form_errors, resubmit
from tests.blackbox.shapes import OpenApi

# The graph the tests ask about (docs/protocol.md §5 import format).
GRAPH = """\
{"kind": "entity", "key": "ada-lovelace", "type": "Person", "name": "Ada Lovelace", "description": "Wrote the first program", "properties": {"born": 1815}}
{"kind": "entity", "key": "charles-babbage", "type": "Person", "name": "Charles Babbage", "description": "Designed the Analytical Engine"}
{"kind": "entity", "key": "analytical-engine", "type": "Machine", "name": "Analytical Engine", "description": "A mechanical general-purpose computer"}
{"kind": "entity", "key": "london", "type": "City", "name": "London", "description": "Capital of England", "properties": {"population": 8900000}}
{"kind": "relationship", "type": "WORKED_WITH", "src": "ada-lovelace", "dst": "charles-babbage", "properties": {"since": 1833}}
{"kind": "relationship", "type": "DESIGNED", "src": "charles-babbage", "dst": "analytical-engine"}
{"kind": "relationship", "type": "LIVED_IN", "src": "ada-lovelace", "dst": "london"}
"""


def create_user(admin: Api, username: str, email: str = "") -> int:
    """Add a user as an operator does, in the Django admin: the "Add user" form, then (for an
    e-mail address) the user's change form. Return the user's id."""
    answer = admin.form(
        "/admin/auth/user/add/",
        {"username": username, "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )
    assert answer.status_code == 302, f"the admin did not add {username}: {form_errors(answer.text)}"
    found = re.search(r"/admin/auth/user/(\d+)/change/", answer.headers["location"])
    assert found, answer.headers["location"]
    if email:
        changed = resubmit(admin, found.group(0), {"email": email})
        assert changed.status_code == 302, (
            f"the admin did not save {username}'s e-mail: {form_errors(changed.text)}"
        )
    return int(found.group(1))


@dataclass
class World:
    """Project "Atlas": ada owns it, bob edits, cy views, dan is not a member."""

    url: str
    openapi: OpenApi
    project: dict[str, Any]
    agents: dict[str, str]
    entities: dict[str, str]
    clients: dict[str, Api] = field(default_factory=dict)

    @property
    def project_id(self) -> str:
        return str(self.project["id"])

    def api(self, username: str) -> Api:
        """A logged-in session of ``username`` (one per user, kept for the session)."""
        if username not in self.clients:
            self.clients[username] = Api(self.url, self.openapi).login(username)
        return self.clients[username]

    def fresh(self, username: str) -> Api:
        """A new, separate login of ``username`` (the caller closes it)."""
        return Api(self.url, self.openapi).login(username)

    def new_project(
        self,
        name: str,
        members: tuple[tuple[str, str], ...] = (("bob", "editor"), ("cy", "viewer")),
        graph: bytes | str | None = None,
    ) -> str:
        """A new project of ada's with ``members`` (username, role) and ``graph`` (JSONL) imported."""
        ada = self.api("ada")
        project = str(ada.call("POST /api/projects", 201, json={"name": name}).json()["id"])
        for username, role in members:
            ada.call(
                "POST /api/projects/{project_id}/members",
                201,
                json={"username": username, "role": role},
                project_id=project,
            )
        if graph is not None:
            ada.call("POST /api/projects/{project_id}/graph/import", 200, content=graph, project_id=project)
        return project


def create_token_in_admin(admin: Api, user_id: int, project_id: str, name: str = "") -> str:
    """An API token bound to a project, made in the Django admin (shown once, in a message)."""
    saved = resubmit(
        admin, "/admin/projects/apitoken/add/", {"user": str(user_id), "project": project_id, "name": name}
    )
    assert saved.status_code == 302, f"the admin did not make the token: {form_errors(saved.text)}"
    shown = re.search(r"The new token is (\S+) ", admin.http.get(saved.headers["location"]).text)
    assert shown, "the admin did not show the new token"
    return shown.group(1)
