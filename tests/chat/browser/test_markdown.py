"""The page's Markdown renderer, run in the browser as a unit: safe by construction, and useful."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, Route

from tests.chat.browser.helpers import STATIC

pytestmark = pytest.mark.browser

ATTACKS = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "<svg><script>window.__pwned = 3</script></svg>",
    '<iframe src="javascript:window.parent.__pwned = 4"></iframe>',
    "[click me](javascript:window.__pwned=5)",
    "[click me](  javascript:window.__pwned=6  )",
    "[x](data:text/html,<script>window.__pwned=7</script>)",
    '<a href="javascript:window.__pwned=8">link</a>',
    "**<b onmouseover=window.__pwned=9>bold</b>**",
    "```html\n</code></pre><script>window.__pwned=10</script>\n```",
    "| a | b |\n|---|---|\n| <script>window.__pwned=11</script> | <img src=x onerror=window.__pwned=12> |",
    "`<script>window.__pwned=13</script>`",
    "<style>body{display:none}</style>",
    '![img](https://example.com/x.png" onerror="window.__pwned=14)',
    '[entity](entity:abc" onclick="window.__pwned=15)',
]

RENDER = """([source, names]) => {
  const out = document.getElementById('out');
  const map = new Map((names || []).map((e) => [e.name.toLowerCase(), e]));
  out.replaceChildren(KGMarkdown.render(source, {entityNames: map}));
  return out.innerHTML;
}"""


ORIGIN = "http://markdown.test"
PAGE = """<!doctype html><html><body><div id='out'></div>
<script type="module">
  import { render } from "/static/chat/markdown.js";
  window.KGMarkdown = { render };
  document.body.dataset.ready = "true";
</script></body></html>"""


def _serve(route: Route) -> None:
    """Answer the page's requests from the checkout, without a server: the page, then the module."""
    path = urlparse(route.request.url).path
    if path == "/":
        route.fulfill(body=PAGE, content_type="text/html")
    else:
        route.fulfill(path=str(STATIC / path.removeprefix("/static/")), content_type="text/javascript")


@pytest.fixture(scope="module")
def md_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.route(f"{ORIGIN}/**", _serve)
    page.goto(f"{ORIGIN}/")
    page.wait_for_selector("body[data-ready='true']", state="attached")
    yield page
    context.close()


def render(page: Page, source: str, names: list[dict[str, Any]] | None = None) -> str:
    return str(page.evaluate(RENDER, [source, names or []]))


@pytest.mark.parametrize("attack", ATTACKS)
def test_model_output_never_becomes_html_or_script(md_page: Page, attack: str) -> None:
    render(md_page, attack)
    md_page.wait_for_timeout(50)

    found = md_page.evaluate(
        """() => {
      const out = document.getElementById('out');
      const bad = out.querySelectorAll('script, img, iframe, svg, style, object, embed, b, link, meta, form');
      const handlers = [...out.querySelectorAll('*')].flatMap((n) => [...n.attributes].map((a) => a.name))
        .filter((name) => name.startsWith('on'));
      const hrefs = [...out.querySelectorAll('a')].map((a) => a.getAttribute('href'));
      return {bad: bad.length, handlers, hrefs, pwned: window.__pwned || null, text: out.textContent};
    }"""
    )

    assert found["bad"] == 0
    assert found["handlers"] == []
    assert all(h.startswith(("https://", "http://", "mailto:", "#entity-")) for h in found["hrefs"]), found
    assert found["pwned"] is None
    assert found["text"].strip()


def test_script_tag_is_shown_as_its_text(md_page: Page) -> None:
    render(md_page, "Before <script>alert('x')</script> after")

    text = md_page.locator("#out").inner_text()

    assert "<script>alert('x')</script>" in text
    assert md_page.locator("#out script").count() == 0


def test_markdown_features_render(md_page: Page) -> None:
    source = "\n".join(
        [
            "## Capitals",
            "",
            "**Paris** is the *capital* of ~~Spain~~ France; see `traverse_graph`.",
            "",
            "- one",
            "- two",
            "  - nested",
            "",
            "1. first",
            "2. second",
            "",
            "> quoted",
            "",
            "```python",
            "print('hi')",
            "```",
            "",
            "| City | Population |",
            "|:-----|-----------:|",
            "| Paris | 2,100,000 |",
            "",
            "[docs](https://example.com/docs) and https://example.org/x.",
        ]
    )

    render(md_page, source)
    out = md_page.locator("#out")

    assert out.locator("h4").inner_text() == "Capitals"
    assert out.locator("strong").inner_text() == "Paris"
    assert out.locator("em").inner_text() == "capital"
    assert out.locator("del").inner_text() == "Spain"
    assert out.locator("p code").first.inner_text() == "traverse_graph"
    assert out.locator("ul > li").count() == 3
    assert out.locator("ul ul > li").inner_text() == "nested"
    assert out.locator("ol > li").count() == 2
    assert out.locator("blockquote").inner_text() == "quoted"
    assert out.locator("pre code").inner_text() == "print('hi')"
    assert out.locator("table td").nth(1).inner_text() == "2,100,000"
    links = out.locator("a.external-link")
    assert links.nth(0).get_attribute("href") == "https://example.com/docs"
    assert links.nth(0).get_attribute("rel") == "noopener noreferrer nofollow"
    assert links.nth(1).get_attribute("href") == "https://example.org/x"


def test_entity_links_and_mentions(md_page: Page) -> None:
    names = [
        {"id": "id-paris", "name": "Paris", "type": "City"},
        {"id": "id-fr", "name": "France", "type": "Country"},
    ]

    render(
        md_page,
        "[the capital](entity:id-paris) lies in France, not in Parisville. `France` stays code.",
        names,
    )
    links = md_page.locator("#out a.entity-link")

    assert links.count() == 2
    assert links.nth(0).get_attribute("data-entity-id") == "id-paris"
    assert links.nth(0).inner_text() == "the capital"
    assert links.nth(1).get_attribute("data-entity-id") == "id-fr"
    assert links.nth(1).inner_text() == "France"
    assert md_page.locator("#out code").inner_text() == "France"
