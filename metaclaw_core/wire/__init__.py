"""Wire formats the core speaks: the OpenAI chat-completions JSON (read into the core's models,
the skills block put into it) and what every format shares (:mod:`.common`). The proxy routes
(:mod:`metaclaw_core.service`), the RL policy server and the bench use them."""
