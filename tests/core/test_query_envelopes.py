"""Query extraction drops the tagged context sections coding agents wrap around the user's
words (Claude Code's ``<system-reminder>``, Codex's ``<environment_context>``) and keeps the
user's own text, tags included, when it is not such a section."""

from __future__ import annotations

from metaclaw_core import Settings
from metaclaw_core.models import CallContext, Message
from metaclaw_core.plugins.query import clean_task_text, metaclaw_extract_query

REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following "
    "context:\n# currentDate\nToday's date is 2026-12-01.\n</system-reminder>"
)
ENVIRONMENT = (
    "<environment_context>\n  <cwd>/work/repo</cwd>\n  <shell>bash</shell>\n</environment_context>"
)


def test_system_reminder_and_environment_context_sections_are_dropped() -> None:
    text = f"{REMINDER}\nRename the config loader to read TOML\n{ENVIRONMENT}"
    assert clean_task_text(text, 2000) == "Rename the config loader to read TOML"


def test_upper_case_instruction_sections_are_dropped_but_the_heading_kept() -> None:
    text = "# AGENTS.md instructions\n\n<INSTRUCTIONS>\nRun make test first.\n</INSTRUCTIONS>"
    assert clean_task_text(text, 2000) == "# AGENTS.md instructions"


def test_a_users_own_markup_is_kept() -> None:
    assert clean_task_text("<b>Bold</b> the heading in index.html", 2000) == (
        "<b>Bold</b> the heading in index.html"
    )
    assert clean_task_text("<div>\nhello\n</div>", 2000) == "<div> hello </div>"
    # An inline mention of a tag is not a section.
    inline = "Why does <system-reminder> appear in my logs? </system-reminder> too"
    assert clean_task_text(inline, 2000) == inline


def test_a_user_turn_that_is_only_context_yields_to_the_users_words() -> None:
    ctx = CallContext(
        messages=[
            Message(role="system", content="You are Codex."),
            Message(role="user", content="Add a --dry-run flag to the deploy script"),
            Message(role="assistant", content="Done."),
            Message(role="user", content=ENVIRONMENT),
            Message(role="user", content=REMINDER),
        ]
    )
    assert metaclaw_extract_query(ctx=ctx, settings=Settings()) == (
        "Add a --dry-run flag to the deploy script"
    )
