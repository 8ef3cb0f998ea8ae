"""A frame's JSON text: built once for every transport, the same as its wire form, rebuilt when renumbered."""

import json

from apps.chat.streams.frames import DoneFrame, McpToolFrame, TokenFrame, frame_from_text
from apps.core.inputs import storable


def test_a_token_frames_wire_form_is_what_its_model_dump_gives_in_the_same_key_order() -> None:
    frame = TokenFrame(seq=7, token="Paris \x00is \ud800big")

    wire = frame.wire()

    expected = storable(frame.model_dump(mode="json"))
    assert wire == expected
    assert list(wire) == list(expected)
    assert wire["token"] == "Paris \ufffdis \ufffdbig"


def test_a_frames_text_is_its_wire_form_as_json_with_unicode_kept() -> None:
    frame = McpToolFrame(seq=3, tool="get_entity_edges", callId="c1", status="started", input={"q": "Zürich"})

    text = frame.text()

    assert json.loads(text) == frame.wire()
    assert "Zürich" in text


def test_a_frame_renumbered_after_its_text_was_built_gets_a_new_text() -> None:
    frame = TokenFrame(token="a")
    before = frame.text()

    frame.seq = 4

    assert json.loads(before)["seq"] == 0
    assert json.loads(frame.text()) == {"seq": 4, "type": "token", "token": "a"}


def test_a_frame_read_back_from_its_text_sends_that_same_text() -> None:
    original = DoneFrame(seq=9, messageId="m", runId=None)
    text = original.text()

    again = frame_from_text(text)

    assert again == original
    assert again.text() is text
