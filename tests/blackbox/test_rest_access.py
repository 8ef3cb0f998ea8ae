"""Who may call (docs/protocol.md §1): without credentials every REST operation answers
``401 unauthorized`` with a JSON body, and a wrong token is no credential."""

from __future__ import annotations

import re
import uuid

import httpx

from tests.blackbox.clients import TIMEOUT, check_error
from tests.blackbox.shapes import OpenApi
from tests.blackbox.world import World


def test_every_rest_operation_without_credentials_answers_401(world: World, openapi: OpenApi) -> None:
    anonymous = httpx.Client(base_url=world.url, timeout=TIMEOUT)
    forged = httpx.Client(base_url=world.url, timeout=TIMEOUT, headers={"Authorization": "Bearer kgc_forged"})
    answers = {}

    for operation in sorted(openapi.operations()):
        method, template = operation.split(" ", 1)
        path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), template)
        for client in (anonymous, forged):
            response = client.request(method, path, json={} if method in {"POST", "PUT", "PATCH"} else None)
            answers[(operation, client is forged)] = response.status_code
            if response.status_code == 401:
                check_error(response, "unauthorized")

    anonymous.close()
    forged.close()
    assert {key: status for key, status in answers.items() if status != 401} == {}
