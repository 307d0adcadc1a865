"""The trained policy's endpoint reads message content as the service's proxy does."""

import pytest

from metaclaw_core.train.serving import chat_request_messages


def test_content_parts_become_the_same_text_as_in_the_proxy() -> None:
    body = {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at this"},
                    {"type": "image_url", "image_url": {"url": "data:,"}},
                    {"type": "text", "text": "and say what it is."},
                ],
            },
        ]
    }
    msgs = chat_request_messages(body)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[1]["content"] == "Look at this\nand say what it is."


@pytest.mark.parametrize("body", [{}, {"messages": []}, {"messages": [{"content": "x"}]}])
def test_malformed_messages_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        chat_request_messages(body)
