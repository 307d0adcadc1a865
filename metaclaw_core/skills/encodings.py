"""Text written so that a reader (or a filter) does not see what it says: reversed, ROT13,
leetspeak, letters spaced apart, percent-, hex-, base64- or escape-encoded.

A skill has no reason to carry an English sentence in a form its reviewer cannot read; the
model can decode it and would follow it. :func:`hidden_sentence` undoes each of these forms
on every line (prose and code) and reports the first one that turns something unreadable into
English. Whether a text "reads as English" is the share of its words that are whole words of
the packaged MiniLM vocabulary (30,000 word pieces, the same model the review runs), or of the
review's own training sentences when that model is not installed.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

_WORD = re.compile(r"[A-Za-z]+")
_TOKEN = re.compile(r"[A-Za-z0-9]+")  # "wh3n" is a word, and not an English one
# a shell command line: a command word where a command starts
_COMMAND = re.compile(
    r"(?:^|[|;&`(]|\$\()\s*(?:sudo\s+)?(?:curl|wget|bash|sh|zsh|nc|ncat|rm|chmod|chown|crontab|"
    r"powershell|iex|eval|exec|python3?|node|perl|scp|rsync|ssh|cat|echo|export|git|aws|gpg)\b"
)
_MIN_WORDS = 5
_READS = 0.7  # a decoding reads as English: this share of its words are words
_OPAQUE = 0.45  # the text as written does not (the decoding must also gain this much)
_GAIN = 0.3

_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2}){8,}")
_HEX = re.compile(r"(?:(?:\\x|0x)?[0-9A-Fa-f]{2}[ ,:]?){12,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_ESCAPES = re.compile(r"(?:\\u[0-9A-Fa-f]{4}|&#x[0-9A-Fa-f]+;|&#\d+;){6,}")
_BINARY = re.compile(r"(?:[01]{8}[ ]?){6,}")
_LEET = str.maketrans("013456789@$|!", "oieasgtbgasli")
_SEGMENT = re.compile(r"(?<=[.!?:;)])\s+|\s+(?=\()|\s*\|\s*")


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """Lower-case English words: the packaged MiniLM's whole-word pieces, else the words of
    the review's training sentences."""
    from metaclaw_core.embeddings import packaged_minilm

    model = packaged_minilm()
    vocab = model / "vocab.txt" if model is not None else None
    if vocab is not None and vocab.is_file():
        words = vocab.read_text(encoding="utf-8").split()
        return frozenset(w for w in words if w.isascii() and w.isalpha() and len(w) > 1) | {
            "a",
            "i",
        }
    training = Path(__file__).resolve().parents[1] / "plugins" / "intent_training"
    found: set[str] = {"a", "i"}
    for tsv in sorted(training.glob("*.tsv")):
        for line in tsv.read_text(encoding="utf-8").splitlines():
            found.update(w.lower() for w in _WORD.findall(line.split("\t", 1)[-1]) if len(w) > 1)
    return frozenset(found)


def english_share(text: str) -> tuple[float, int]:
    """(share of the words of ``text`` that are English words, how many words); words of
    three letters or more, since the vocabulary holds most two-letter strings."""
    words = [w for w in _TOKEN.findall(text) if len(w) > 2 and not w.isdigit()]
    if not words:
        return 0.0, 0
    vocab = vocabulary()
    return sum(w.lower() in vocab for w in words) / len(words), len(words)


def _leet(text: str) -> str:
    # "1" is "i" or "l": whichever makes a word
    vocab = vocabulary()

    def word(m: re.Match[str]) -> str:
        w = m.group(0)
        a, b = w.translate(_LEET), w.replace("1", "l").translate(_LEET)
        return b if b.lower() in vocab and a.lower() not in vocab else a

    return re.sub(r"[A-Za-z0-9@$|!]+", word, text)


def _spaced(text: str) -> str:
    # "a l w a y s   s e n d": letters one space apart are one word, wider gaps part words
    groups = re.split(r"\s{2,}", text.strip())
    return " ".join(
        "".join(g.split()) if all(len(t) == 1 for t in g.split()) else g for g in groups
    )


def _bytes_text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(c.isprintable() or c in "\n\t" for c in text)
    return text if text and printable / len(text) > 0.95 else None


def _payloads(line: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in _PERCENT.finditer(line):
        out.append(("percent-encoding", unquote(m.group(0))))
    for m in _HEX.finditer(line):
        digits = re.sub(r"\\x|0x|[ ,:]", "", m.group(0))
        if len(digits) % 2 == 0:
            text = _bytes_text(binascii.unhexlify(digits))
            if text:
                out.append(("hex", text))
    for m in _BASE64.finditer(line):
        token = m.group(0)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(token + "=" * (-len(token) % 4))
            except (binascii.Error, ValueError):
                continue
            text = _bytes_text(raw)
            if text:
                out.append(("base64", text))
                break
    for m in _ESCAPES.finditer(line):
        text = re.sub(r"\\u([0-9A-Fa-f]{4})", lambda e: chr(int(e.group(1), 16)), m.group(0))
        text = re.sub(r"&#x([0-9A-Fa-f]+);", lambda e: chr(int(e.group(1), 16)), text)
        text = re.sub(r"&#(\d+);", lambda e: chr(int(e.group(1))), text)
        out.append(("character escapes", text))
    for m in _BINARY.finditer(line):
        bits = m.group(0).replace(" ", "")
        text = _bytes_text(int(bits, 2).to_bytes(len(bits) // 8, "big"))
        if text:
            out.append(("binary", text))
    return out


def _rewritings(segment: str) -> list[tuple[str, str]]:
    return [
        ("reversed text", segment[::-1]),
        ("ROT13", codecs.encode(segment, "rot13")),
        # leetspeak: only where several words mix digits into letters ("s3" alone is a name)
        *(
            [("leetspeak", _leet(segment))]
            if len(re.findall(r"\b(?=\w*[A-Za-z])(?=\w*\d)\w+", segment)) >= 3
            else []
        ),
        ("letters spaced apart", _spaced(segment)),
    ]


def _reads(text: str) -> float:
    share, words = english_share(text)
    return share if words >= _MIN_WORDS else 0.0


def hidden_sentence(text: str) -> tuple[str, str] | None:
    """(the encoding, the English it decodes to) for the first line of ``text`` that carries
    an English sentence in a form that does not read as one; None if there is none."""
    for line in text.splitlines():
        if len(line.strip()) < 12:
            continue
        for how, decoded in _payloads(line):
            share, words = english_share(decoded)
            if (words >= 6 and share >= _READS) or (
                len(_WORD.findall(decoded)) >= 3 and _COMMAND.search(decoded)
            ):
                return how, decoded.strip()
        for segment in {line, *_SEGMENT.split(line)}:
            if len(segment.strip()) < 12:
                continue
            as_written = english_share(segment)[0]
            if as_written > _OPAQUE:
                continue
            for how, decoded in _rewritings(segment):
                gained = _reads(decoded)
                if gained >= _READS and gained - as_written >= _GAIN:
                    return how, decoded.strip()
    return None
