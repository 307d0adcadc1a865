"""Row counts of a local Lance table read from its manifest, without importing LanceDB.

Importing ``lancedb`` costs a cold process 1-3 s on two cores (its generated REST client
alone builds several hundred pydantic models), which is most of what ``metaclaw status``
used to take. A count needs none of it: each version of a Lance table is one manifest file,
``<table>.lance/_versions/<n>.manifest``, a protobuf ``Manifest`` whose fragments carry
``physical_rows`` and, for deleted rows, a ``DeletionFile`` with ``num_deleted_rows``
(``protos/table.proto`` of the Lance format). The file ends with the manifest's offset
(u64), the format version (2 x u16) and ``LANC``; at the offset, a u32 length and the
message. Version numbers are the file names (v1 naming) or ``2**64 - 1 -`` them (v2 naming,
so the newest sorts first).

Anything this reader does not recognise raises :class:`ManifestError`; callers then read the
table through LanceDB as before.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

_U64_MAX = 2**64 - 1
_MAGIC = b"LANC"
# Reader feature flags this reader knows do not change a row count: 1 deletion files, 2
# stable row ids, 4 v2 data files, 8 table config.
_KNOWN_FLAGS = 1 | 2 | 4 | 8


class ManifestError(Exception):
    """The manifest is missing, damaged or uses something this reader does not know."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ManifestError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ManifestError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of one protobuf message."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise ManifestError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ManifestError("truncated field")
        out.append((number, wire, value))
    return out


def _fragment_rows(fragment: bytes) -> int:
    physical = deleted = 0
    for number, _, value in _fields(fragment):
        if number == 4 and isinstance(value, int):  # physical_rows
            physical = value
        elif number == 3 and isinstance(value, bytes):  # deletion_file
            for n, _, v in _fields(value):
                if n == 4 and isinstance(v, int):  # num_deleted_rows
                    deleted = v
    if deleted > physical:
        raise ManifestError("a fragment deletes more rows than it has")
    return physical - deleted


def manifest_rows(data: bytes) -> int:
    """The live row count of one manifest file's bytes."""
    if len(data) < 16 or data[-4:] != _MAGIC:
        raise ManifestError("not a Lance manifest (no LANC footer)")
    (offset,) = struct.unpack_from("<Q", data, len(data) - 16)
    if offset + 4 > len(data) - 16:
        raise ManifestError("manifest offset out of range")
    (size,) = struct.unpack_from("<I", data, offset)
    message = data[offset + 4 : offset + 4 + size]
    if len(message) != size:
        raise ManifestError("truncated manifest")
    rows = 0
    for number, _, value in _fields(message):
        if number == 2 and isinstance(value, bytes):  # fragments
            rows += _fragment_rows(value)
        elif number == 9 and isinstance(value, int) and value & ~_KNOWN_FLAGS:
            raise ManifestError(f"unknown reader feature flags {value}")
    return rows


def latest_manifest(table_dir: Path) -> Path | None:
    """The newest version's manifest of a Lance table directory; None if there is no table."""
    versions = table_dir / "_versions"
    try:
        names = os.listdir(versions)
    except FileNotFoundError:
        if table_dir.exists():
            raise ManifestError(f"{table_dir} has no _versions directory") from None
        return None
    best: tuple[int, str] | None = None
    for name in names:
        stem, _, ext = name.partition(".")
        if ext != "manifest" or not stem.isdigit():
            continue
        n = int(stem)
        version = _U64_MAX - n if n > 2**63 else n  # v2 naming counts down from 2**64 - 1
        if best is None or version > best[0]:
            best = (version, name)
    if best is None:
        raise ManifestError(f"{versions} holds no manifest")
    return versions / best[1]


def table_rows(db_dir: str | Path, table: str) -> int | None:
    """Rows of table ``table`` in the local LanceDB directory ``db_dir`` (None: no table)."""
    path = latest_manifest(Path(db_dir) / f"{table}.lance")
    if path is None:
        return None
    try:
        return manifest_rows(path.read_bytes())
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from exc
