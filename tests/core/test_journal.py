"""The capture journal's write: the GIL-holding libc call, its errors, and the fsync path."""

import errno
import os
from pathlib import Path

import pytest

from metaclaw_core.store.journal import CaptureJournal, _gil_holding_write, read_records


def test_gil_holding_write_writes_and_reports_errors(tmp_path: Path) -> None:
    write = _gil_holding_write()
    assert write is not os.write  # libc is there on every platform the journal supports
    path = tmp_path / "f"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    assert write(fd, b"abc\n") == 4
    assert write(fd, b"") == 0
    os.close(fd)
    with pytest.raises(OSError) as exc:
        write(fd, b"lost\n")
    assert exc.value.errno == errno.EBADF
    assert path.read_bytes() == b"abc\n"


@pytest.mark.parametrize(
    ("fsync", "hold_gil", "plain"),
    [(False, False, True), (False, True, False), (True, True, True), (True, False, True)],
)
def test_appended_records_read_back(
    tmp_path: Path, fsync: bool, hold_gil: bool, plain: bool
) -> None:
    journal = CaptureJournal(
        tmp_path / "spool", segment_bytes=1 << 20, fsync=fsync, hold_gil=hold_gil
    )
    # the GIL is held only when asked for, and never around fsync (which waits on the disk)
    assert (journal._write is os.write) == plain
    records = [f'{{"k":"r","n":{i}}}'.encode() for i in range(100)]
    places = [journal.append(r) for r in records]
    assert len({number for number, _ in places}) == 1
    (segment,) = [s.path for s in journal._segments.values()]
    assert [r for _, r in read_records(segment)] == records
    # a replay of some records reads just those, by the offsets append returned
    some = [places[i][1] for i in (0, 41, 99)]
    assert list(read_records(segment, some)) == [
        (off, rec) for off, rec in zip(some, [records[0], records[41], records[99]], strict=True)
    ]
    journal.close()
