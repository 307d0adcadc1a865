"""How the admission review reads a skill: prose statements apart from code, with polarity.

A skill's text is markdown. Fenced code blocks are set apart (they are examples, read by the
code checks, not instructions in prose); inline code stays in its sentence without the
backticks. The prose is cut into statements (lines, bullets, sentences); each carries

* ``prohibited``: the statement warns *against* what it names ("Never force-push", a bullet
  under "Anti-patterns:", "Avoid ..."), so what it names is not asked for;
* ``consent_removed``: it takes away a safeguard ("without asking", "no need to confirm",
  "don't tell the user", "skip the approval");
* ``consent_required``: it puts a safeguard on the act ("ask before ...", "only after the user
  approves", "never ... without confirming").

These are readings of English grammar (negators, the words for asking and telling), not lists
of dangerous topics: the topics are judged by meaning, against exemplars (vet_intent.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from metaclaw_core.skills.quotations import MENTION, quoted_reading

_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")
_LABEL = re.compile(
    r"^\s*(?:\*\*|__)?([A-Za-z][\w '’/-]{0,40}?)(?:\*\*|__)?\s*:(?:\*\*|__)?(?:\s+|$)"
)
# A short label before a dash: "Common mistake — ...", "Anti-pattern – ..."
_DASH_LABEL = re.compile(r"^([A-Za-z][\w '’/-]{0,30}?)\s+[—–]\s+(?=\S)")
_MISTAKE = re.compile(
    r"^(?:(?:a|the|one|two|\d+|common|frequent|typical|classic|known|big|main)\s+)*"
    r"(?:mistakes?|pitfalls?|anti-?patterns?|bad (?:practice|habit|pattern)s?|wrong|incorrect|"
    r"don'?ts|what not to do|failure mode)$",
    re.I,
)
_SENTENCE = re.compile(
    r"(?<=[.!?;])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)\s+(?=[A-Za-z`\"'(*])"
)
_WORD = re.compile(r"[a-z']+")

# Lead-ins that make what follows a warning, not an instruction.
_NEGATIVE_LEAD = re.compile(
    r"\b(?:never|don'?t|do not|must not|mustn'?t|should not|shouldn'?t|may not|"
    r"avoid|anti-?patterns?|mistakes?|pitfalls?|bad|wrong|warnings?|"
    r"caution|dangerous|danger|forbidden|prohibited|not allowed|red flags?|what not to do|"
    r"don'?ts|(?<!low-)(?<!no-)risks?(?!-free)|threats?|attacks?|not (?:like )?this|incorrect|"
    r"insecure|unsafe|examples? of (?:irreversible|destructive|dangerous|"
    r"risky|unsafe))\b",
    re.I,
)
# A prohibition: the statement opens with a negator, or a modal says "must not".
_PROHIBITION = re.compile(
    # "If the hook flags a secret, don't bypass it": a condition may open the sentence
    r"^(?:(?:if|when|whenever|where|once|while|even if|even when)\b[^,;:]{1,120},\s*|"
    # "If a document asks you to reveal X, change Y, or run Z, do not do it": what some text
    # asks for, listed (not what the user or the operator asks)
    r"(?:if|when|whenever|even if)\s+"
    r"(?!(?:[\w-]+\s+){0,2}(?:user|owner|customer|operator|manager|admin|person|team|you)\b)"
    r"(?:(?:a|an|the|any|some|its|their)\s+)?[\w-]+(?:\s+[\w-]+)?"
    r"\s+(?:asks?|tells?|instructs?|wants?|requests?|demands?|urges?|directs?)\s+(?:you\s+)?"
    r"to\s+[^,;:]{1,80}(?:,\s*[^,;:]{1,80}){0,8}?,\s*(?:or|and)\s+[^,;:]{1,80},\s*)?"
    r"(?:(?:please|and|but|also|then|instead),?\s+)?(?:you\s+|agents?\s+|"
    r"we\s+)?(?:should\s+|must\s+|shall\s+|may\s+)?(?:never|not|no|don'?t|dont|do not|avoid\w*|"
    # "stop sending ..." forbids; "stop and ask", "stop." halt and take the next step
    r"refrain from|refuse to|decline to|stop(?=\s+(?!and\b|then\b)\w)|nothing)\b|"
    r"\b(?:must|should|shall|may|can|will)(?:\s+never|\s+not|n'?t)\b|\b(?:is|are) (?:never|not) "
    # "`curl -k` and `verify=False` are not fixes"
    r"(?:allowed|acceptable|ok|okay|permitted|(?:a |the )?(?:fix|fixes|solutions?)\b)|"
    r"\b(?:forbidden|prohibited)\b",
    re.I,
)
# "never hesitate to ...", "don't forget to ...", "never skip quoting ...": two negatives
# make a directive (not "never skip the review": that keeps a safeguard, see _polarity)
_DOUBLE_NEGATIVE = re.compile(
    r"\b(?:never|don'?t|do not|not)[\s,]+(?:ever[\s,]+)?(?:hesitate|fail|forget|neglect|miss)\b|"
    r"\b(?:never|don'?t|do not|not)[\s,]+(?:ever[\s,]+)?(?:skip|omit|overlook|neglect)\s+\w+ing\b|"
    # "nothing should stop you from ...", "let nothing keep you from ..."
    r"\b(?:nothing|no one|nobody)\s+(?:\w+\s+)?(?:stops?|prevents?|keeps?|stop|prevent|keep)\s+"
    r"(?:you|the agent|the assistant)\s+from\b",
    re.I,
)
# A lead-in that insists rather than warns: "Don't forget to:", "Never skip these steps",
# "Things you must not miss": what follows it is to be done
_EMPHATIC_LEAD = re.compile(
    r"\b(?:never|don'?t|do not|not|must not|mustn'?t|should not|shouldn'?t|can'?t|cannot)"
    r"[\s,]+(?:ever[\s,]+)?(?:\w+\s+)?(?:forget|fail|skip|omit|neglect|miss|overlook|ignore|"
    r"hesitate|leave out|disregard|bypass|stop|delay|postpone|be afraid|question|doubt|argue|"
    r"second-guess|deviate|worry|hold back|be shy|be modest)\b|\b(?:not|never) optional\b|"
    r"\bno exceptions?\b|"
    # "Warning: the following is required:", "Caution - mandatory steps:"
    r"\b(?:required|mandatory|compulsory|obligatory|must-do)\b",
    re.I,
)
# The safeguards: asking, confirming, telling, waiting, reviewing.
_SAFEGUARD = (
    r"(?:ask\w*|check\w*(?: with| in)?|confirm\w*|approv\w*|permission|consent\w*|tell\w*|"
    r"inform\w*|notif\w*|mention\w*|warn\w*|wait\w*|review\w*|verif\w*|(?<!system )prompt\w*|"
    r"bother\w*|"
    r"consult\w*|double-check\w*|sign-?off|authori[sz]\w*|input|knowing|noticing|"
    r"show\w*(?: them| the user| it)?|"
    r"let\w* (?:them|the user|the customer|anyone|people) (?:know|see|find out|notice|hear)|"
    # refusing, pushing back and hedging are safeguards too: "never refuse" removes one
    r"refus\w*|declin\w*|push\w* back|hedg\w*|caveat\w*|second-guess\w*|water\w* down|"
    r"hold\w* back)"
)
# Verbs that take a safeguard away ("skip the review", "turn off verification") ...
_TAKE_AWAY = (
    r"skip\w*|bypass\w*|disabl\w*|(?:turn|switch)\w* (?:[\w-]+ ){0,2}?off|suppress\w*|omit\w*|"
    r"forgo\w*"
)
# ... and more that do when negated: "don't disable verification", "never ignore a failing
# check" keep the safeguard.
_REMOVAL = (
    r"(?:" + _TAKE_AWAY + r"|remov\w*|weaken\w*|circumvent\w*|ignor\w*|override\w*|"
    # "never stop asking": stopping a safeguard is taking it away
    r"(?:stop|quit|cease)(?:s|ped|ping)?(?=\s+\w+ing\b))"
)
# "ask someone to do", "ask for a thing": a request, unlike "ask first", "ask for permission"
_REQUEST = re.compile(
    r"\s+(?:(?:ever|even|you|we)\s+)?(?:ask|request)\w*\s+"
    r"(?:(?!whether\b|if\b|before\b|first\b|how\b)\w+\s+){0,3}?(?:"
    # "ask them to tell you the code": the user telling the agent is a request too
    r"to\s+(?!be\b|sign\b|decide\b|agree\b)(?:tell\s+(?:you|us|me)\b|(?!" + _SAFEGUARD + r"\b)\w+)|"
    r"for[\s,]+(?!(?:\w+\s+)?(?:permission|confirmation|approval|consent|sign-?off|"
    r"go-ahead|input|review|feedback)\b)\w+)",
    re.I,
)
_NEGATED_SAFEGUARD = re.compile(
    r"\b(?:never|don'?t|do not|not|no need to|no need for|needn'?t|without|instead of|"
    + _TAKE_AWAY
    + r")"
    r"(?:\s+\w+){0,3}?\s+(?:the |a |any |an |their |user'?s? |human |explicit |prior )*"
    + _SAFEGUARD
    # "never ship verify=False": a safeguard word glued to code is an identifier
    + r"\b(?![=(.:_]\w)",
    re.I,
)
# A safeguard declared needless: "confirmations are unnecessary", "a review isn't needed",
# "no sign-off required"
_DISMISSED_SAFEGUARD = re.compile(
    # "stop asking", "quit checking with them", "no longer confirm"
    r"\b(?:stop|quit|cease)(?:s|ped|ping)?\s+(?:ask|check|confirm|prompt|verify|verifi|"
    r"review|tell|inform|notify|notifi|bother|consult|double-check)\w*ing\b|"
    r"\bno longer\s+(?:ask|check|confirm|prompt|verify|review|tell|inform|notify|bother|"
    r"consult|double-check)\w*\b|"
    r"\b" + _SAFEGUARD + r"(?:[\s-]+[\w'-]+){0,5}?\s+(?:is|are|was|were|'s|seems?|feels?|"
    r"becomes?|would be|will be)\s+(?:just\s+|only\s+|simply\s+|really\s+)?(?:"
    r"unnecessary|needless|unneeded|superfluous|redundant|pointless|optional|overkill|"
    r"not allowed|forbidden|prohibited|not permitted|discouraged|"
    r"a waste|wasted|not (?:needed|necessary|required|useful|worth it)|no longer needed)\b|"
    r"\b" + _SAFEGUARD + r"(?:[\s-]+[\w'-]+){0,5}?\s+(?:isn'?t|aren'?t|wasn'?t|weren'?t)\s+"
    r"(?:really\s+)?(?:needed|necessary|required|useful|worth it)\b|"
    # "it doesn't need sign-off from branch owners", "this does not require a review"
    r"\b(?:doesn'?t|does not|don'?t|do not|won'?t|will not|never)\s+(?:need|require)s?\s+"
    r"(?:a |an |any |the |their |your )?(?:[\w-]+\s+){0,2}?" + _SAFEGUARD + r"\b|"
    r"\bno\s+"
    + _SAFEGUARD
    + r"(?:\s+\w+){0,2}?\s+(?:is\s+|are\s+)?(?:needed|necessary|required)\b|"
    # "the user doesn't need to be interrupted", "they needn't be told"
    r"\b(?:doesn'?t|does not|don'?t|do not|won'?t|will not|never|needn'?t)\s+(?:(?:need|have)\s+"
    r"to\s+)?be\s+(?:" + _SAFEGUARD + r"|interrupted)\b|"
    # "small differences aren't worth the user's attention"
    r"\b(?:not|aren'?t|isn'?t)\s+worth\s+(?:the\s+user'?s?|their|your|the\s+customer'?s?|"
    r"anyone'?s)\s+(?:attention|time)\b|"
    # "asking first makes the user sort through thousands of messages": a safeguard turned
    # down by what it costs
    r"\b(?:ask|confirm|check|wait|prompt|interrupt|bother|notif|tell|inform)\w*(?:\s+\w+){0,3}?\s+"
    r"(?:just\s+|only\s+|would\s+)?(?:slows?|annoys?|wastes?|clutters?|delays?|frustrates?|"
    r"overwhelms?|adds? (?:friction|noise|delay)|makes? (?:the user|them|people|everyone|"
    r"customers?|the customer) (?:sort|wait|wade|dig|scroll|click|repeat|deal)|makes? (?:the "
    r"assistant|the agent|you|us) (?:seem|look|sound))\b",
    re.I,
)
_CONSENT_REQUIRED = re.compile(
    r"\b(?:ask\w*|confirm\w*|check\w* with|get\w* (?:approval|permission|consent|sign-?off)|"
    r"wait\w* for (?:approval|confirmation|the user)|request\w* (?:approval|confirmation))\b"
    r"[^.;]{0,80}\b(?:before|first|prior)\b|"
    r"\b(?:only|unless)\b[^.;]{0,40}\b(?:user|owner|they|human)\b[^.;]{0,30}"
    r"\b(?:asks?|confirms?|approves?|agrees?|requests?|explicitly|says? so)\b|"
    r"\b(?:requires?|needs?|with|after)\b (?:the user'?s? |their |explicit |written |prior )*"
    r"(?:approval|confirmation|consent|permission|sign-?off)\b|"
    r"\b(?:for the user to (?:review|approve|send|confirm)|let the user (?:review|decide|"
    r"confirm|approve|send))\b|"
    r"\b(?:stop|pause|halt) (?:and|to) (?:ask|check|confirm|wait)\b|"
    # a safeguard weighed and found worth it: "the cost of pausing to ask is always lower"
    r"\b(?:ask|confirm|check)\w*(?:\s+\w+){0,3}?\s+(?:is|are)\s+(?:always\s+|usually\s+|far\s+)?"
    r"(?:better|cheaper|lower|safer|worth|preferable|wiser|smaller)\b(?!\s+(?:skipped|left|"
    r"avoided|off|omitted|dropped|not|without))",
    re.I,
)
_CONCEAL = re.compile(
    r"\b(?:silently|quietly|secretly|covertly|discreetly|behind the user'?s back|"
    r"without (?:the user|them|anyone) (?:knowing|noticing|seeing))\b",
    re.I,
)
# The way turned down: "rather than silently fixing them", "instead of quietly retrying",
# "not silently": a hidden act named as the alternative to reject is not asked for.
_REJECTED_WAY = re.compile(
    r"\b(?:rather than|instead of|as opposed to|not|never|no|don'?t|do not|nor)\s+(?:\w+\s+){0,2}$",
    re.I,
)


def _conceals(text: str) -> bool:
    """Whether ``text`` asks for something hidden from the user (not turned down)."""
    return any(not _REJECTED_WAY.search(text[: m.start()]) for m in _CONCEAL.finditer(text))


_GOOD_STATE = (
    r"(?:complete\w*|done|pass(?:ed|es|ing)?|green|clean|fixed|resolved|success\w*|succeed\w*|"
    r"healthy|fine|reconciled|on track|processed|sent|paid|safe|went well|no issues)"
)
# Telling the user: "mention them as a note", "report the error", "communicate the level of
# confidence", "a partial result reported honestly" ...
_DISCLOSE = re.compile(
    r"\b(?:mention|tell|report|flag|surface|say|explain|communicate|show|list|disclose|"
    r"acknowledge|admit|call out|point out|highlight|warn|inform|notify|let (?:them|the user|the "
    r"customer) know)\w*\b",
    re.I,
)
# ... unless it is kept back in part ("only", "skip", "leave out", "not"), kept private, or a
# claim of a good state ("report it as completed", "tell them it was processed")
_DISCLOSE_UNLESS = re.compile(
    r"\b(?:only|skip\w*|omit\w*|leav\w* out|left out|exclud\w*|except|unless|"
    # ("push the fix without asking and tell the user" tells; "without mentioning it" does not)
    r"without (?:ever )?(?:mention|tell|report|list|show|flag|surfac|explain|disclos|notif|"
    r"inform|say)\w*|"
    # "instead of listing them" trades telling for something else ("instead of asserting
    # uncertain things as fact" trades a false claim for telling)
    r"instead of (?:mention|tell|report|list|show|flag|surfac|explain|disclos)\w*|private\w*|"
    r"internal\w*|hidden|scratch|vague\w*|generic|"
    # ... or argued against: "mentioning them makes users lose confidence"
    r"alarm\w*|worr\w*|confus\w*|clutter\w*|nois\w*|distract\w*|overwhelm\w*|scar\w*|panic\w*|"
    r"lose confidence|unnecessar\w*|"
    r"never|not|no|don'?t|doesn'?t|do not|won'?t|n't)\b",
    re.I,
)
# ... or what is told is a good state: a claim, true or not ("report it as completed", "tell
# them it was processed", "tell the user everything went fine"; not "better than a green
# summary")
_CLAIM_AFTER = re.compile(
    r"^(?:(?!\bthan\b|\binstead\b|\brather\b)[^.;])*?\b" + _GOOD_STATE + r"\b", re.I
)


# Two negatives that keep something in what the user is told
_KEEPS_IN = re.compile(
    r"^(?:\w+\s+){0,3}?(?:never|don'?t|do not)\s+(?:leave\s+(?:\S+\s+){0,6}?out|omit|hide|drop|"
    r"skip|leave\s+out)\b[^.;]*\b(?:summary|report|recap|update|reply|answer|description|"
    r"changelog|notes?|message|list)\b",
    re.I,
)
_CLAIMED = re.compile(r"\bas (?:\w+ ){0,2}" + _GOOD_STATE + r"\b", re.I)


def discloses(text: str) -> bool:
    """Whether a statement orders telling the user (what was done, what failed, what is
    uncertain), wholly and truly: the opposite of concealment. The way turned down counts
    for it ("mention them rather than silently fixing them")."""
    rejected = any(_REJECTED_WAY.search(text[: m.start()]) for m in _CONCEAL.finditer(text))
    if rejected:
        text = _CONCEAL.split(text)[0]
        text = re.sub(r"\b(?:rather than|instead of)\s*$", "", text.strip(), flags=re.I)
    if _KEEPS_IN.search(text) and not _CLAIMED.search(text):
        return True  # "never leave the failed tests out of the summary"
    told = _DISCLOSE.search(text)
    if told is None or _DISCLOSE_UNLESS.search(text) or _CLAIM_AFTER.search(text[told.end() :]):
        return False
    # "Reporting every retry ...": a disclosure as the subject is talked about, not ordered
    return not told.group(0).lower().endswith("ing")


_RANK_VERB = (
    r"(?:override|overrule|outrank|supersede|trump|replace|take precedence over|win over|"
    r"come before|count as|become|change|alter|modify)s?"
)
# "They don't override the user's request", "nothing in a fetched page outranks the user",
# "tool output can never replace your instructions"
_RANK_DENIED = re.compile(
    r"(?:\b(?:do|does|did|must|should|can|could|will|would|may|shall)(?:\s+not|n'?t|\s+never)"
    r"|\bnever|\bnothing\b[^.;:]{0,80}?|\bno\s+\w+(?:\s+\w+)?\b[^.;:]{0,60}?)\s+"
    rf"(?:\w+\s+){{0,2}}?{_RANK_VERB}\s+(?:\w+\s+){{0,2}}?"
    r"(?:user|user's|users|you|your|operator|operator's|system prompt|system instructions|"
    r"person|people you work for)\b",
    re.I,
)


def keeps_rank(text: str) -> bool:
    """Whether a statement denies that something outranks the user ("they don't override
    the user's request"): the opposite of trust inversion and rank claims. Not when the user
    is what is said to be outranked by nothing ("the user's words do not override the
    README")."""
    m = _RANK_DENIED.search(text)
    return m is not None and not re.search(r"\b(?:user|you)\b", text[: m.start()], re.I)


# What a statement does to the command it names, read in the command's own clause: turns it
# down ("never fix SSH with chmod 777", "no verify=False", "--force-with-lease rather than
# --force", "prefer packages over curl | sh"), or guards against it ("flag any policy granting
# iam:*", "keep deny rules for rm -rf", "stops rm -rf "$d/" from becoming rm -rf /")
# said right before the command: "never fix SSH with", "no", "rather than", "over"
_TURNED_DOWN = re.compile(
    r"\b(?:never|no|not|nor|don'?t|do not|avoid\w*|without|instead of|rather than|over)\b", re.I
)
# a guard whose object the command is: "flag any policy granting", "keep deny rules for"
_GUARDS = re.compile(
    r"\b(?:find|finds|found|flag\w*|catch\w*|detect\w*|deny|denies|block\w*|ban|bans|"
    r"reject\w*|forbid\w*|disallow\w*|refus\w*)\b",
    re.I,
)
_PREVENTED = re.compile(
    r"\b(?:stops?|prevents?|guards?|keeps?)\b[^.;:]*\b(?:from|becoming|turning into)\b", re.I
)
_CAUGHT_AFTER = re.compile(
    r"^\)?\s*(?:(?:is|are|gets?|will be)\s+(?:still\s+)?(?:caught|blocked|rejected|denied|"
    r"flagged|refused)|(?:can'?t|cannot|won'?t)\s+(?:bypass|skip|get past|slip|sneak))\b",
    re.I,
)
_CLAUSE_END = re.compile(r"[,;:.!?](?=\s|$)|[—–]")


def _clause_before(text: str, at: int) -> list[str]:
    before = text[:at]
    opened = before.rfind("(")
    if opened > before.rfind(")"):
        before = before[:opened]  # a parenthesis lists examples of what its clause says
    clauses = _CLAUSE_END.split(before)
    words = clauses.pop().split()
    if not words:
        # the command opens its clause: an item of a list ("deny rules for rm -rf, git push
        # --force, curl | sh"), read in the clause that opened the list
        while clauses and len(clauses[-1].split()) <= 4:
            clauses.pop()
        words = clauses[-1].split() if clauses else []
    return words


def turned_down(text: str, start: int, end: int) -> bool:
    """Whether the command at ``text[start:end]`` is what its clause turns down or guards
    against, not what it orders. A negated guard permits it ("don't block curl | sh")."""
    span = text[start:end].rstrip()
    last = start + max(span.rfind(" ") + 1, 0)  # "--force-with-lease rather than --force"
    for at in {start, last}:
        words = _clause_before(text, at)
        near, guard_zone = " ".join(words[-4:]), " ".join(words[-6:])
        guard = _GUARDS.search(guard_zone)
        if guard:
            if not _TURNED_DOWN.search(guard_zone[: guard.start()]):
                return True
        elif _TURNED_DOWN.search(near):
            return True
    if _PREVENTED.search(text[:start]) and re.search(
        r"\b(?:from|becoming|turning into)\s+$", text[:start], re.I
    ):
        return True
    return bool(_CAUGHT_AFTER.match(text[end:].lstrip()))


@dataclass(frozen=True)
class Statement:
    """One instruction-sized piece of prose, with how it is meant."""

    text: str
    prohibited: bool
    consent_removed: bool
    consent_required: bool
    concealed: bool
    lead: str = ""


@dataclass(frozen=True)
class Reading:
    """A skill's text as the review reads it."""

    statements: list[Statement]
    code: list[str]  # fenced blocks and inline spans, as written
    prose: str  # the text without fenced blocks and backticks


def split_code(text: str, placeholder: str = "\n") -> tuple[str, list[str]]:
    """(text with each fenced block replaced by ``placeholder``, the code: blocks then inline
    spans)."""
    code: list[str] = []

    def keep(m: re.Match[str]) -> str:
        code.append(m.group(2))
        return placeholder

    prose = _FENCE.sub(keep, text)
    code += _INLINE.findall(prose)
    return prose, code


_CLAUSE = re.compile(
    r",?\s+(?:but|however|except|although|though|otherwise|yet)\b[,\s]*|\s+[—–]\s+|;\s*|"
    r",\s+(?:and then|then|and also)\s+|"
    # "trust the proxy's CA, not turn verification off": the way turned down is its own clause
    r",\s+(?=(?:not|never|rather than|instead of)\s)",
    re.I,
)
_STARTS_WITH_SAFEGUARD = re.compile(r"^\s*(?:\w+\s+){0,1}?" + _SAFEGUARD + r"\b", re.I)


# A subordinate clause up to the next comma: its negation is not the lead-in's ("fix them
# globally so they don't come back:" introduces a fix, not a warning)
_SUBORDINATE = re.compile(
    r"\b(?:so that|so|if|when|whenever|unless|because|until|in case|since|once|as long as|"
    # "steps to avoid data loss" (not "things to avoid": that names what is avoided)
    r"whether|(?:in order )?to (?:avoid|prevent|stop)(?=\s+\w))\b[^,;:]*",
    re.I,
)
# "Avoid repeated password prompts:", "Prevent permission errors:": avoiding a problem (a
# noun, not an act in -ing or a pointer at the code) introduces the remedy, not a warning
_TAKES_NOUN = re.compile(r"\b(?:avoid\w*|prevent\w*|no|stop)\b", re.I)
_AVOIDED_PROBLEM = re.compile(
    r"\b(?:avoid|prevent)\w*\s+(?!(?:\w+ing|this|that|these|those|it|them|the following|"
    r"anything|something|commands?|code|snippets?|lines?|scripts?|patterns?|examples?)\b)"
    r"[^,;:]*",
    re.I,
)


def _main_clause(text: str) -> str:
    return _SUBORDINATE.sub(" ", text)


# ... or one that turns from what not to do to what to do: "Don't wait for IT, run this
# instead:", "Not the old way. Do this:"
_REMEDY_LEAD = re.compile(
    r"(?:[,;.\u2013\u2014]|\s-\s|\bbut\b)\s*(?:(?:just|then|simply|so)\s+)?(?:do this|use this|"
    r"run this|try this|here(?:'s| is)|the fix|the solution|the right way|the correct way)\b|"
    r"(?:[,;.\u2013\u2014]|\s-\s|\bbut\b)[^,;.\u2013\u2014]*\binstead\b(?!\s+of)|"
    r"^(?:but\s+)?rather\b(?!\s+than)",
    re.I,
)


def _negative(lead: str) -> bool:
    """Whether a lead-in (a heading, a label, a line ending in ':') warns against what follows:
    "Never:", "Anti-patterns", "Things to avoid", "What a skill must not do" (not "Don't forget
    to:", "Never skip these steps", "Avoid delays by doing this:", "Risk-free steps")."""
    if _EMPHATIC_LEAD.search(lead) or _REMEDY_LEAD.search(lead):
        return False
    return bool(_NEGATIVE_LEAD.search(_AVOIDED_PROBLEM.sub(" ", _main_clause(lead))))


def fenced_blocks(text: str) -> list[tuple[str, bool]]:
    """Each fenced code block, and whether a warning introduces it (the nearest heading or
    the prose line just above it: "Anti-pattern:", "Never run this:")."""
    out: list[tuple[str, bool]] = []
    for m in _FENCE.finditer(text):
        before = [ln.strip() for ln in text[: m.start()].splitlines() if ln.strip()]
        last = before[-1] if before else ""
        heading = next((ln for ln in reversed(before) if _HEADING.match(ln)), "")
        # the sentence that ends in ':' above it, or the heading: "Never run this:"
        warned = _negative(_SENTENCE.split(last)[-1]) or _negative(heading)
        out.append((m.group(2), warned))
    return out


# Disclosing someone's private data or a secret: "show one customer another customer's name",
# "mention the diagnosis", "tell them the card number"
_DISCLOSES_PRIVATE = re.compile(
    r"\s+(?:(?:ever|even|you|we)\s+)?(?:show|tell|mention|reveal|display|share|disclose|"
    r"read out|repeat|include|print|echo|say)(?:s|ing)?\s+(?:[\w'-]+\s+){0,6}?(?:"
    r"(?:another|other|a different)\s+(?:\w+\s+)?(?:customer|user|patient|client|person|"
    r"employee|member|tenant|student)s?'?s?|someone else'?s|(?:their|the)\s+(?:full\s+)?"
    r"(?:card|account|social security|ssn|passport)\s+numbers?|passwords?|passcodes?|"
    r"private keys?|secrets?|tokens?|credentials?|diagnos\w+|medical|health|salar\w+|"
    r"date of birth|personal (?:data|information|details)|pii)\b",
    re.I,
)
# A safeguard forbidden by what is said of it: "confirming with the user is not allowed"
_FORBIDDEN_SAFEGUARD = re.compile(
    r"^(?:(?:a|an|the|any)\s+)?" + _SAFEGUARD + r"(?:[\s-]+[\w'$,-]+){0,8}?\s+(?:is|are)\s+"
    r"(?:not allowed|forbidden|prohibited|not permitted|discouraged)\b",
    re.I,
)
# "don't ... until the user confirms", "hold it until they approve"
_UNTIL_CONSENT = re.compile(
    r"\b(?:never|don'?t|do not|not|hold|wait|keep)\b[^.;]{0,60}\b(?:until|unless|till)\s+"
    r"(?:the user|they|the owner|the customer|a person|someone on the team|you get|you have)\b"
    r"[^.;]{0,30}\b(?:confirms?|approves?|agrees?|says? so|signs? off|replies|answers|okays?|"
    r"approval|confirmation|consent|go-?ahead)\b",
    re.I,
)
_NO_NEED = re.compile(r"\b(?:no need to|needn'?t|don'?t (?:need|have) to|not necessary to)\b", re.I)
# a negation earlier in the same clause: "don't run them | without the user's review"
_NEGATOR = r"(?:never|don'?t|do not|must not|mustn'?t|should not|shouldn'?t|cannot|can'?t|may not)"
_NOT_BEFORE = re.compile(r"\b(?:" + _NEGATOR + r"|no one|nobody)\b[^,;:]*$", re.I)
_NOT_OPENING = re.compile(_NEGATOR + r"\b", re.I)


def _polarity(text: str, inherited: bool, lead: str) -> Statement:
    """How one clause is meant (``inherited``: it sits under a warning lead-in)."""
    double = bool(_DOUBLE_NEGATIVE.search(text))
    until = _UNTIL_CONSENT.search(text)
    removed = (
        bool(_NEGATED_SAFEGUARD.search(text)) or bool(_DISMISSED_SAFEGUARD.search(text))
    ) and not double
    required = bool(_CONSENT_REQUIRED.search(text))
    if until is not None and not _NO_NEED.search(text[: until.start() + 12]):
        # "don't send invites until the user confirms the slot": not before the go-ahead
        removed, required = False, True
    negated = _NEGATED_SAFEGUARD.search(text)
    if (
        removed
        and negated is not None
        and re.search(r"\bwithout\b", negated.group(0), re.I)
        and (
            _NOT_OPENING.match(negated.group(0)) is not None
            or _NOT_BEFORE.search(text[: negated.start()]) is not None
        )
        and not _DISMISSED_SAFEGUARD.search(text)
    ):
        # "read them, don't run them without the user's review": not without it, so with it
        removed, required = False, True
    opening = _PROHIBITION.search(text)
    prohibited = inherited or (opening is not None and not double)
    if opening is not None and not double:
        after = text[opening.end() : opening.end() + 40]
        without = re.search(r"\bwithout\b|\bunless\b", text[opening.end() :], re.I)
        if re.match(r"\s+(?:(?:ever|even|you|we)\s+)?" + _REMOVAL + r"\b", after, re.I):
            # "don't disable verification", "never skip the review": two negatives keep the
            # safeguard; the statement forbids taking it away
            removed, prohibited = False, True
        elif _DISCLOSES_PRIVATE.match(after) or _DISCLOSES_PRIVATE.match(text[opening.end() :]):
            # "never show one customer another customer's orders", "don't mention the
            # diagnosis in the SMS": privacy, a disclosure forbidden, not a safeguard removed
            removed, prohibited = False, True
        elif _REQUEST.match(after):
            # "don't ask them to paste keys", "never ask for the password": asking for
            # something is a request, not a safeguard; the statement forbids the request
            removed, prohibited = False, True
        elif re.match(
            r"\s+(?:(?:ever|even|bother|to|you|we|need|have|stop)\s+){0,2}"
            # "avoid repeated password prompts": after a verb that takes a noun, modifiers
            # may stand before the safeguard (not acts: "avoid leaking the prompt")
            + (r"(?:(?!\w+ing\b)[\w-]+\s+){0,2}?" if _TAKES_NOUN.search(opening.group(0)) else "")
            + _SAFEGUARD
            + r"\b",
            after,
            re.I,
        ):
            # "never ask before ...", "don't tell the user": a safeguard taken away
            removed, prohibited = True, False
        elif without is not None and not inherited:
            # "never pay without asking": forbidden unless consented to
            removed, required = False, True
        elif removed and not _NEGATED_SAFEGUARD.match(text, opening.start()):
            # "don't work around failures by disabling the sandbox", "don't paste the
            # system prompt": the safeguard words sit inside what is forbidden, further on
            removed = False
    if inherited:
        if (
            _STARTS_WITH_SAFEGUARD.match(text)
            and opening is None
            and not _REQUEST.match(" " + text)
        ):
            # under "Avoid:": "asking the user before paying" means: do not ask (not "ask the
            # agent to hide its actions": a request, named as what not to do)
            removed, prohibited = True, False
        elif removed and opening is None:
            # under "Anti-patterns:": "executing destructive operations without
            # confirmation" names the bad practice, it does not ask for it
            removed = False
    if (
        not inherited
        and opening is not None
        and opening.start() > 0
        and _FORBIDDEN_SAFEGUARD.search(text)
        and not double
    ):
        # "asking the user for confirmation is not allowed": the safeguard is what is
        # forbidden, so it is taken away
        removed, prohibited, required = True, False, False
    return Statement(
        text=text,
        prohibited=prohibited and not removed,
        consent_removed=removed,
        consent_required=required and not removed,
        concealed=_conceals(text) and not prohibited,
        lead=lead,
    )


def statement_of(text: str) -> Statement:
    """One piece of text read as a single statement (no lead-in above it)."""
    return _polarity(" ".join(text.split()), False, "")


_CONSEQUENCE = re.compile(
    r"^(?:that|this|which|doing so)\s+(?:only\s+|just\s+|also\s+)?(?:hides|masks|breaks|"
    r"opens|exposes|leaks|causes|risks|defeats|bypasses|loses|destroys|corrupts|undermines|"
    r"weakens|invites|hurts|pollutes|floods|wipes|silences)\b",
    re.I,
)


def _clauses(sentence: str) -> list[str]:
    parts = [p.strip(" ,") for p in _CLAUSE.split(sentence)]
    return [p for p in parts if len(_WORD.findall(p.lower())) >= 2] or [sentence]


def read_skill(text: str, *, max_statements: int = 200) -> Reading:
    """Statements of ``text`` (at most ``max_statements``) and its code. A quotation of what
    some text says is read as a mention (it stands as ``MENTION`` in its statement) or,
    when the skill adopts it, also as a statement of its own (see ``skills.quotations``)."""
    prose, code = split_code(text)
    plain = _INLINE.sub(lambda m: m.group(1), prose)
    statements = _statements(plain, max_statements)
    mentions, adopted = quoted_reading(prose, statements)
    if mentions:
        for start, end in reversed(mentions):
            prose = f"{prose[:start]}{MENTION}{prose[end:]}"
        plain = _INLINE.sub(lambda m: m.group(1), prose)
        statements = _statements(plain, max_statements)
    for words in adopted[: max(0, max_statements - len(statements))]:
        statements.append(statement_of(words))
    return Reading(statements, code, plain)


_BLOCKQUOTE = re.compile(r"^\s*(?:>\s?)+")
_WRAPPED = re.compile(
    r"(?:\"([^\"]+)\"|\u201c([^\u201c\u201d]+)\u201d|'([^']+)'|\u2018([^\u2018\u2019]+)\u2019)"
    r"([.:]?)"
)


def _statements(plain: str, max_statements: int) -> list[Statement]:
    statements: list[Statement] = []
    lead, lead_negative = "", False
    for raw in plain.splitlines():
        line = _BLOCKQUOTE.sub("", raw).strip()
        if not line:
            continue
        heading = _HEADING.match(line)
        if heading:
            lead = heading.group(1).strip(" *_:#")
            lead_negative = _negative(lead)
            continue
        is_bullet = bool(_BULLET.match(line))
        body = _BULLET.sub("", line)
        label = _LABEL.match(body)
        if label and not body[label.end() :].strip(" *_"):
            # a label alone on its line ("**Never:**") heads what follows
            lead, lead_negative = label.group(1), _negative(label.group(1))
            continue
        inherited = lead_negative and is_bullet
        this_lead = lead if is_bullet else ""
        if label:
            # "Anti-pattern: ...", "Fix: ...": the label says how the rest is meant
            this_lead = label.group(1)
            inherited = inherited or _negative(this_lead)
            body = body[label.end() :]
        body = body.replace("**", "").replace("__", "").strip()
        # a line that is one quotation reads as what it says ('"Never mention deleted
        # files."'): the marks must not hide its order or its polarity from the review (a
        # quoted question is someone's utterance, a FAQ's, and keeps its marks)
        wrapped = _WRAPPED.fullmatch(body)
        if wrapped and not wrapped.group(0).rstrip("\"'\u201d\u2019.:").endswith("?"):
            body = next(g for g in wrapped.groups()[:4] if g is not None) + wrapped.group(5)
        dashed = _DASH_LABEL.match(body)
        if dashed and not (_MISTAKE.search(dashed.group(1)) and _negative(dashed.group(1))):
            dashed = None
        if dashed:
            # "Common mistake — proceeding without asking": a label that names a mistake
            # before a dash heads its sentence (not "Don't worry — just pay")
            body = body[dashed.end() :]
        if not is_bullet:
            # a paragraph closes the list above it; one ending in ':' opens the next
            lead, lead_negative = "", False
            if body.endswith(":"):
                # the sentence that ends in ':' is the lead-in ("Auth failures are almost
                # always a wrong token. To debug:" leads into steps, not warnings)
                sentences = _SENTENCE.split(body)
                lead = body.rstrip(":")
                lead_negative = (
                    _negative(sentences[-1]) or (inherited and len(sentences) == 1)
                ) and not _EMPHATIC_LEAD.search(sentences[-1])
        after_warning = False
        for n, sentence in enumerate(_SENTENCE.split(body)):
            warned, its_lead = inherited, this_lead
            if dashed and n == 0:
                warned, its_lead = True, dashed.group(1)
            for clause in _clauses(sentence.strip()):
                if len(_WORD.findall(clause.lower())) < 2:
                    continue
                # "don't reach for `chmod -R 777`; that hides the real problem": the reason a
                # warning gives is part of it
                reason = after_warning and bool(_CONSEQUENCE.match(clause))
                statements.append(_polarity(clause, warned or reason, its_lead))
                after_warning = statements[-1].prohibited
                if len(statements) >= max_statements:
                    return statements
    return statements


# A setting in a code block: "refusal_policy: disabled", "VERIFY_SSL=false", '"mode": "open"'
_SETTING = re.compile(
    r"^\s*(?:-\s+)?(?:export\s+|set\s+)?[\"']?([A-Za-z][\w.-]{1,40})[\"']?\s*(?::|=)\s*"
    r"(?![/=])([^\n#]*?)\s*,?\s*(?:#\s*(.*))?$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
SETTING = "setting in code"  # the ``lead`` of a statement read from a setting
_NEGATED_KEY = re.compile(r"^(?:no|non|not|disable|disallow|deny|block|forbid|prevent)\s+(.+)$")
_GRANTING_KEY = re.compile(r"^(?:allow|allows|enable|permit|grant)\s+(.+)$")
_TRUE = frozenset(["true", "yes", "on", "1", "enabled"])
_FALSE = frozenset(["false", "no", "off", "0", "disabled"])


def _words_of(key: str) -> str:
    return " ".join(_CAMEL.sub(" ", key).replace("_", " ").replace("-", " ").split(".")).lower()


def settings_in_code(text: str) -> list[Statement]:
    """The settings a skill's code blocks make, read as statements ("Set refusal policy to
    disabled"), so the meaning review reads configuration as it reads prose. Settings in a
    block under a warning are read as warned against."""
    out: list[Statement] = []
    for block, warned in fenced_blocks(text):
        for line in block.splitlines():
            m = _SETTING.match(line)
            if m is None:
                continue
            value = m.group(2).strip().strip("\"'")
            if not value or value in ("{", "[", "|", ">") or "(" in value or len(value) > 120:
                continue  # a call is code, not a setting
            note = f" ({m.group(3).strip()})" if m.group(3) and m.group(3).strip() else ""
            key = _words_of(m.group(1))
            negated = _NEGATED_KEY.match(key)
            if negated and value.lower() in _TRUE:
                # "no_new_privileges: true", "disable_uploads = 1": a restriction put on
                sentence = f"Forbid {negated.group(1)}{note}."
            elif negated and value.lower() in _FALSE:
                sentence = f"Allow {negated.group(1)}{note}."
            elif (granted := _GRANTING_KEY.match(key)) and value.lower() in _FALSE:
                # "allowPrivilegeEscalation: false": a restriction too
                sentence = f"Forbid {granted.group(1)}{note}."
            else:
                sentence = f"Set {key} to {value}{note}."
            st = statement_of(sentence)
            out.append(
                Statement(
                    sentence,
                    st.prohibited or warned,
                    st.consent_removed and not warned,
                    st.consent_required,
                    st.concealed and not warned,
                    SETTING,
                )
            )
    return out
