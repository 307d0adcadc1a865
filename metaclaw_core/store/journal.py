"""The capture journal: an append-only spool that makes an acknowledged capture durable.

``after_call`` appends one line per trajectory (one ``write`` syscall, no fsync by default:
the bytes are in the kernel once it returns, so they survive ``kill -9`` of the host; set
``store.fsync`` to survive power loss too). ``os.write`` releases the GIL for its few
microseconds, and when the writer thread was waiting for it the host's call then waits for the
writer's next stretch of Python (a p99 many times the write's own; docs/benchmarks.md). So by
default (``store.journal_holds_gil``) the write keeps the GIL (:func:`_gil_holding_write`), at
the price that a stalled write stalls every thread of the host, not only the caller.

The background writer commits the same records to LanceDB and deletes a segment once every
record in it is committed. Records that could not be queued (queue full) or committed (store
down) stay in their segment and are replayed from the file, later in this process or at the
next start-up; replay skips ids already stored.

Each process owns a folder ``<spool>/<pid>-<random>/`` under an exclusive ``flock``; a folder
whose lock can be taken belongs to a dead process and is replayed by whoever takes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("metaclaw.journal")

LOCK_NAME = "owner.lock"
SEG_PREFIX = "seg-"
SEG_SUFFIX = ".jsonl"


@dataclass
class _Segment:
    number: int
    path: Path
    appended: int = 0
    settled: int = 0
    unqueued: int = 0  # records that left the writer's queue without being stored
    replay: list[int] = field(default_factory=list)  # their byte offsets in the file
    dirty: bool = False
    closed: bool = False
    opened_at: float = field(default_factory=time.monotonic)
    size: int = 0


class CaptureJournal:
    """This process's spool folder: append, rotate, settle, and find what needs replay."""

    def __init__(
        self, root: Path, *, segment_bytes: int, fsync: bool = False, hold_gil: bool = False
    ) -> None:
        self.root = Path(root)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        self.dir = self.root / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(mode=0o700)
        self._lock_fd = os.open(self.dir / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock = threading.Lock()
        self._segments: dict[int, _Segment] = {}
        self._fd = -1
        self._current: _Segment | None = None
        self._next = 1
        self._closed = False
        self._write = _gil_holding_write() if hold_gil and not fsync else os.write
        self._open_segment()

    # -- hot path ------------------------------------------------------------------------
    def append(self, record: bytes) -> tuple[int, int]:
        """Write one record (a line, with or without its newline); return where it is: its
        segment number and its byte offset in the segment."""
        line = record if record.endswith(b"\n") else record + b"\n"
        with self._lock:
            if self._closed:
                raise OSError("metaclaw: the capture journal is closed")
            seg = self._current
            assert seg is not None
            n = self._write(self._fd, line)
            if n != len(line):  # a short write on a regular file means the disk is full
                raise OSError(f"metaclaw: short write to the capture journal ({n}/{len(line)})")
            if self.fsync:
                os.fsync(self._fd)
            seg.appended += 1
            offset = seg.size
            seg.size += n
            return seg.number, offset

    # -- writer side ---------------------------------------------------------------------
    def _open_segment(self) -> None:
        number = self._next
        self._next += 1
        path = self.dir / f"{SEG_PREFIX}{number:012d}{SEG_SUFFIX}"
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        seg = _Segment(number=number, path=path)
        self._segments[number] = seg
        if self._current is not None:
            self._current.closed = True
        self._current = seg

    def rotate(self, *, force: bool = False, max_age_s: float = 30.0) -> None:
        """Close the current segment if it is big, old, dirty or ``force`` (and not empty)."""
        with self._lock:
            seg = self._current
            if seg is None or self._closed or seg.appended == 0:
                return
            if (
                force
                or seg.dirty
                or seg.size >= self.segment_bytes
                or time.monotonic() - seg.opened_at >= max_age_s
            ):
                self._open_segment()

    def settle(self, counts: dict[int, int]) -> None:
        """Records were committed to the store: ``counts`` maps segment → how many."""
        with self._lock:
            for number, n in counts.items():
                seg = self._segments.get(number)
                if seg is not None:
                    seg.settled += n

    def mark_dirty(self, places: list[tuple[int, int]]) -> None:
        """Records at these places (segment, offset) left the writer's queue without reaching
        the store (queue full, store down) and must be replayed from the file."""
        with self._lock:
            for number, offset in places:
                seg = self._segments.get(number)
                if seg is not None:
                    seg.dirty = True
                    seg.unqueued += 1
                    seg.replay.append(offset)

    def sweep(self) -> list[tuple[Path, list[int]]]:
        """Delete closed, fully settled segments; return closed dirty ones to replay, each
        with the offsets of the records in it that need it.

        A dirty segment is replayed only once none of its records is still queued: a record
        stored by the replay and then again by its queued commit would be stored twice.
        """
        to_replay: list[tuple[Path, list[int]]] = []
        done: list[Path] = []
        with self._lock:
            for number, seg in list(self._segments.items()):
                if not seg.closed:
                    continue
                if seg.dirty:
                    if seg.settled + seg.unqueued >= seg.appended:
                        to_replay.append((seg.path, sorted(seg.replay)))
                elif seg.settled >= seg.appended:
                    done.append(seg.path)
                    del self._segments[number]
        # Outside the lock: a hot-path append must not wait on a syscall of this thread.
        for path in done:
            _unlink(path)
        return to_replay

    def replayed(self, path: Path) -> None:
        """A dirty segment's records are all in the store now."""
        with self._lock:
            for number, seg in list(self._segments.items()):
                if seg.path == path:
                    del self._segments[number]
        _unlink(path)

    @property
    def pending(self) -> int:
        """Records appended but not yet known to be in the store."""
        with self._lock:
            return sum(max(0, s.appended - s.settled) for s in self._segments.values())

    @property
    def dirty_segments(self) -> int:
        with self._lock:
            return sum(1 for s in self._segments.values() if s.dirty)

    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments.values())

    def close(self) -> None:
        """Close the folder; remove it if nothing in it still needs replay."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._current is not None:
                self._current.closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            clean = all((not s.dirty and s.settled >= s.appended) for s in self._segments.values())
            if clean:
                shutil.rmtree(self.dir, ignore_errors=True)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)

    # -- recovery ------------------------------------------------------------------------
    def orphaned_folders(self) -> Iterator[tuple[Path, int]]:
        """Yield (folder, locked fd) for spool folders of processes that are gone.

        The caller replays the folder's segments, then calls :func:`release_orphan`.
        """
        for folder in sorted(self.root.iterdir()):
            if folder == self.dir or not folder.is_dir():
                continue
            try:
                fd = os.open(folder / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a live process owns it
                os.close(fd)
                continue
            yield folder, fd


def _gil_holding_write() -> Any:
    """``write(fd, data) -> int`` that keeps the GIL during the syscall, else ``os.write``.

    libc's ``write`` through ``ctypes.PyDLL`` (which, unlike ``CDLL``, does not release the
    GIL). For a page-cache write of one record that is a few microseconds in which no other
    Python thread could have run anyway; it is not used with ``fsync`` (milliseconds).
    """
    try:
        c_write = ctypes.PyDLL(None, use_errno=True).write
    except (OSError, AttributeError):  # no C library to call into: the portable call
        return os.write
    c_write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    c_write.restype = ctypes.c_ssize_t

    def write(fd: int, data: bytes) -> int:
        while True:
            n: int = c_write(fd, data, len(data))
            if n >= 0:
                return n
            err = ctypes.get_errno()
            if err != errno.EINTR:
                raise OSError(err, os.strerror(err))

    return write


def segment_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{SEG_PREFIX}*{SEG_SUFFIX}"))


def read_records(path: Path, offsets: list[int] | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, record) for each complete line; a torn last line is skipped.

    With ``offsets``, only the records starting there, each with its offset instead of its
    line number.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    if offsets is not None:
        for offset in offsets:
            end = data.find(b"\n", offset)
            if end > offset:
                yield offset, data[offset:end]
        return
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        log.warning("metaclaw: %s ends with a partial record (torn write); skipped", path)
    for i, line in enumerate(lines[:-1], start=1):
        if line.strip():
            yield i, line


def release_orphan(folder: Path, fd: int, *, remove: bool) -> None:
    if remove:
        shutil.rmtree(folder, ignore_errors=True)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
