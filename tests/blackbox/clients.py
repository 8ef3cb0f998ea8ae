"""Clients as kgchat's users have them: a browser's session (login form, cookies, CSRF), an API
token, Server-Sent Events and the chat websocket. Every answer is checked against its shape
(``shapes``) as it arrives, so no test can forget to."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from html.parser import HTMLParser
from typing import Any

import httpx
import websockets

from tests.blackbox.shapes import ERROR_BODY, OpenApi, Turn, check_event, check_frame, validate

TIMEOUT = 60.0  # s: bounds a hang, measures nothing
PASSWORD = "blackbox-pw-1"
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class Api:
    """One client of the REST API: logged in with a session (``login``) or holding a token."""

    def __init__(self, base_url: str, openapi: OpenApi, *, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, timeout=TIMEOUT, headers=headers)
        self.base_url = base_url
        self.openapi = openapi
        self.username = ""

    def close(self) -> None:
        self.http.close()

    # -- the login page, as a browser submits it ------------------------------------------------
    def login(self, username: str, password: str = PASSWORD) -> Api:
        page = self.http.get("/accounts/login/")
        assert page.status_code == 200
        answer = self.http.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": _csrf_input(page.text),
                "next": "/chat/",
            },
        )
        assert answer.status_code == 302 and answer.headers["location"] == "/chat/", (
            answer.status_code,
            answer.text[:500],
        )
        self.username = username
        return self

    @property
    def csrf(self) -> str:
        return self.http.cookies.get("csrftoken") or ""

    @property
    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies.jar)

    def form(self, path: str, data: dict[str, str]) -> httpx.Response:
        """Submit the form at ``path`` (a Django page, such as the admin's) with its CSRF token."""
        page = self.http.get(path)
        assert page.status_code == 200, (path, page.status_code)
        return self.http.post(path, data={"csrfmiddlewaretoken": _csrf_input(page.text), **data})

    # -- REST --------------------------------------------------------------------------------
    def call(
        self,
        operation: str,
        expect: int,
        code: str | None = None,
        *,
        json: Any = None,
        content: bytes | str | None = None,
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        **path: str,
    ) -> httpx.Response:
        """``operation`` ("METHOD /api/path/{param}") with ``path`` parameters; assert the status
        (and error ``code``) and check the body: the OpenAPI schema of a success, the error shape."""
        method, template = operation.split(" ", 1)
        url = template.format(**path)
        sent = dict(headers or {})
        if method in UNSAFE and self.csrf:
            sent["X-CSRFToken"] = self.csrf
        response = self.http.request(
            method, url, json=json, content=content, files=files, data=data, params=params, headers=sent
        )
        assert response.status_code == expect, (
            f"{operation} {url}: {response.status_code} {response.text[:800]}"
        )
        if response.status_code >= 400:
            check_error(response, code)
        elif response.status_code != 204 and response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            self.openapi.check(operation, response.status_code, response.json())
        return response

    # -- Server-Sent Events --------------------------------------------------------------------
    def stream(self, body: dict[str, Any]) -> Turn:
        """``POST /api/chat/stream``: the turn's frames, checked."""
        status, frames, text = self.stream_raw(body)
        assert status == 200, f"POST /api/chat/stream: {status} {text[:800]}"
        return Turn(frames)

    @contextmanager
    def streaming(self, body: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        """``POST /api/chat/stream`` read frame by frame while the turn runs (the test acts between)."""
        headers = {"X-CSRFToken": self.csrf} if self.csrf else {}
        with self.http.stream("POST", "/api/chat/stream", json=body, headers=headers) as response:
            assert response.status_code == 200, (response.status_code, response.read()[:800])
            yield sse_frames(response.iter_lines())

    def stream_raw(self, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]], str]:
        """``POST /api/chat/stream`` as it is: its status, its frames (each checked), or its body."""
        headers = {"X-CSRFToken": self.csrf} if self.csrf else {}
        with self.http.stream("POST", "/api/chat/stream", json=body, headers=headers) as response:
            if response.status_code != 200:
                text = response.read().decode()
                check_error(response, None)
                return response.status_code, [], text
            assert response.headers["content-type"].startswith("text/event-stream")
            return 200, list(sse_frames(response.iter_lines())), ""


def _csrf_input(html: str) -> str:
    found = CSRF_INPUT.search(html)
    assert found, "no CSRF token in the form"
    return found.group(1)


def check_error(response: httpx.Response, code: str | None) -> dict[str, Any]:
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    body: dict[str, Any] = response.json()
    validate(body, ERROR_BODY)
    if code is not None:
        assert body["code"] == code, body
    return body


def sse_frames(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The frames of an SSE body: ``event: <type>`` then ``data: <json>``, a blank line ends one."""
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            frame = json.loads("\n".join(data))
            check_frame(frame)
            if event is not None:
                assert event == frame["type"], (event, frame)
            yield frame
            event, data = None, []
            if frame["type"] == "done":
                return


# -- the websocket ------------------------------------------------------------------------------
class Socket:
    """The chat websocket of a logged-in browser; frames and events are checked as they arrive."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.events: list[dict[str, Any]] = []  # messages without seq: request errors, approval_decided

    async def send(self, message: dict[str, Any] | str) -> None:
        await self.connection.send(message if isinstance(message, str) else json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        """The next message (at most ``TIMEOUT`` s: a hang fails, it is not measured)."""
        message = json.loads(await asyncio.wait_for(self.connection.recv(), TIMEOUT))
        if "seq" in message:
            check_frame(message)
        else:
            check_event(message)
        return dict(message)

    async def next_event(self) -> dict[str, Any]:
        """The next message that is not a turn's frame (frames before it are dropped)."""
        while True:
            message = await self.receive()
            if "seq" not in message:
                return message

    async def frames_until_done(self) -> list[dict[str, Any]]:
        """A turn's frames up to its ``done``; events received meanwhile go to ``events``."""
        frames: list[dict[str, Any]] = []
        while True:
            message = await self.receive()
            if "seq" not in message:
                self.events.append(message)
                continue
            frames.append(message)
            if message["type"] == "done":
                return frames

    async def turn(self) -> Turn:
        return Turn(await self.frames_until_done())


@asynccontextmanager
async def socket(api: Api) -> AsyncIterator[Socket]:
    """The websocket with ``api``'s session cookie, from the site's own origin (as a browser)."""
    url = api.base_url.replace("http://", "ws://") + "/ws/chat/"
    headers = {"Cookie": api.cookie_header} if api.cookie_header else {}
    async with websockets.connect(
        url, origin=api.base_url, additional_headers=headers, open_timeout=TIMEOUT
    ) as connection:
        yield Socket(connection)


@contextmanager
def logged_in(base_url: str, openapi: OpenApi, username: str, password: str = PASSWORD) -> Iterator[Api]:
    api = Api(base_url, openapi).login(username, password)
    try:
        yield api
    finally:
        api.close()


class _FormFields(HTMLParser):
    """The values a browser would submit for each ``<form method="post">`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[list[tuple[str, str]]] = []
        self._open = False
        self._select: str | None = None
        self._textarea: str | None = None
        self._text: list[str] = []

    @property
    def largest(self) -> list[tuple[str, str]]:
        """The page's main form (the admin's header has a small logout form too)."""
        return max(self.forms, key=len) if self.forms else []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method", "").lower() == "post":
            self._open = True
            self.forms.append([])
            return
        if not self._open:
            return
        fields = self.forms[-1]
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = a.get("type", "text").lower()
            if kind in {"checkbox", "radio"}:
                if "checked" in a:
                    fields.append((name, a.get("value", "on")))
            elif kind not in {"submit", "button", "file", "image", "reset"}:
                fields.append((name, a.get("value", "")))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            fields.append((self._select, a.get("value", "")))
        elif tag == "textarea" and name:
            self._textarea, self._text = name, []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea is not None and self.forms:
            text = "".join(self._text)
            self.forms[-1].append((self._textarea, text[1:] if text.startswith("\n") else text))
            self._textarea = None


def form_errors(html: str) -> str:
    """The error messages a Django form page shows (to explain a refused submission)."""
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S)
    return " | ".join(re.sub(r"<[^>]+>", " ", f).strip() for f in found) or html[:1000]


def resubmit(api: Api, path: str, changes: dict[str, str]) -> httpx.Response:
    """Submit the form of the page at ``path`` as shown, with ``changes``: an operator editing
    one field of an object in the Django admin."""
    page = api.http.get(path)
    assert page.status_code == 200, (path, page.status_code)
    parser = _FormFields()
    parser.feed(page.text)
    data: dict[str, list[str]] = {}
    for name, value in parser.largest:
        data.setdefault(name, []).append(value)
    data.update({name: [value] for name, value in changes.items()})
    return api.http.post(path, data=data)
