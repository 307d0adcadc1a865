"""How ``db/`` was made, by the code of main before agents (commit 39e944c):

    PYTHONPATH=<a checkout of 39e944c> python make_fixture.py /tmp/old-home

then ``db/`` copied here. Two live skills after four generations (one retired), a pending
candidate, three trajectories, one reward.
"""

import shutil
import sys
from pathlib import Path

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill

FACTS = "When answering factual questions"
home = Path(sys.argv[1])
shutil.rmtree(home, ignore_errors=True)
s = Settings(home=home, load_entrypoints=False)
s.holdout.enabled = False
e = MetaClaw(s)
assert e.wait_ready(120)
lib = e.library
lib.add(
    [
        Skill(name="cite-sources", description=FACTS, body="Cite the source of every fact."),
        Skill(
            name="retry-timeouts",
            description="When a tool call times out",
            body="Retry a timed-out tool call once with a longer timeout.",
        ),
    ],
    reason="seed",
)
lib.update(
    Skill(name="cite-sources", description=FACTS, body="Cite every fact, with a link."),
    reason="sharpen",
)
lib.add(
    Skill(name="old-rule", description="When formatting dates", body="Write YYYY-MM-DD."),
    reason="dates",
)
lib.retire("old-rule", reason="unhelpful")
lib.propose(
    [
        Skill(
            name="waiting-rule",
            description="When a user asks for a summary",
            body="Summarise in three bullet points.",
            source="evolver",
        )
    ]
)
ids = []
for q in ["What is the capital of France?", "The search tool timed out", "Summarise this page"]:
    ctx = CallContext(messages=[Message(role="user", content=q)])
    e.before_call(ctx)
    ids.append(e.after_call(ctx, "an answer"))
e.feedback(ids[0], 1.0)
e.flush()
e.close()
shutil.rmtree(home / "spool", ignore_errors=True)
shutil.rmtree(home / "cache", ignore_errors=True)
