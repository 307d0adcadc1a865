"""8 threads x 1,000 calls while the library changes: nothing lost, no torn generations."""

import threading

from metaclaw_core import CallContext, Message, MetaClaw, Skill

TOPICS = [
    "Write the date and time of the meeting in the log",
    "Delete the temporary files in the build folder",
    "Write a SQL query that lists the orders of last week",
    "Draft a polite email to the customer about the delay",
]


def test_concurrent_calls_while_generation_advances(engine: MetaClaw) -> None:
    engine.add_skills(
        [
            Skill(
                name="iso-timestamps",
                description="When writing dates and times",
                body="Use ISO 8601.",
            ),
            Skill(
                name="confirm-deletes",
                description="When deleting files",
                body="Ask before deleting.",
            ),
        ]
    )
    for t in TOPICS:  # warm the query cache so the run measures the engine, not MiniLM
        engine.before_call(CallContext(messages=[Message(role="user", content=t)]))

    results: list[tuple[int, list[str], str | None]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()
    calls_made = [0]
    changed = threading.Event()

    def caller(n: int) -> None:
        try:
            local = []
            for i in range(1000):
                calls_made[0] += 1  # racy but only a progress hint for the evolver thread
                if n == 0 and i == 500:  # make sure the run spans a library change
                    changed.wait(120)
                c = CallContext(
                    session_id=f"t{n}",
                    messages=[Message(role="user", content=TOPICS[(n + i) % len(TOPICS)])],
                )
                inj = engine.before_call(c)
                tid = engine.after_call(c, "ok", injection=inj)
                local.append((inj.generation, inj.skill_names, tid))
            with lock:
                results.extend(local)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def evolver() -> None:
        try:
            while calls_made[0] < 200 and not stop.is_set():  # change the library mid-traffic
                stop.wait(0.001)
            k = 0
            while not stop.is_set() and k < 6:
                engine.add_skills(
                    Skill(
                        name=f"sql-rule-{k}",
                        description="When writing SQL queries",
                        body=f"SQL rule {k}.",
                    )
                )
                if k % 2:
                    engine.library.retire(f"sql-rule-{k - 1}")
                changed.set()
                k += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            changed.set()

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
    ev = threading.Thread(target=evolver)
    ev.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    ev.join()
    assert not errors
    assert len(results) == 8000 and all(tid for _, _, tid in results)
    assert engine.flush(120)
    assert engine.trajectories.count() == 8000

    live_by_gen = {
        g.number: {s.name for s in engine.library.live(g.number)} for g in engine.library.history()
    }
    assert len({g for g, _, _ in results}) > 1  # calls really spanned several generations
    for gen, names, _ in results:
        assert set(names) <= live_by_gen[gen], (gen, names)  # one generation per injection

    stamped = {t.id: t.generation for t in engine.trajectories.recent(10_000)}
    assert all(stamped[tid] == gen for gen, _, tid in results if tid)
