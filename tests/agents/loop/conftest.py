from collections.abc import Iterator

import pytest

from tests.llm_server import LLMTestServer


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer() as s:
        yield s
