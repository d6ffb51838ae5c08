"""What a model proposes to remember, made safe to write: one rule for every path that turns a
model's words into a memory (extraction, and the agent's own tool).

A name must be a usable one (not a type name, a stop word or a whole sentence: a short name
is made from the text instead); a type is read through its aliases and must be one of the
store's; placeholders are not bodies; descriptions are one line; credentials are redacted
before anything is shown. This module does NOT ask a model (``extract`` does) and writes
nothing.
"""

from __future__ import annotations

import re
from typing import Any

from ..find.search import STOP_WORDS, tokenize
from ..gate.safetext import CJK_CHAR, one_line
from ..gate.secrets import redact
from ..memory import MAX_DESCRIPTION_CHARS, Memory, slugify, valid_name
from ..store import Store

TYPE_ALIASES = {
    "preference": "user_preference",
    "user": "user_preference",
    "fact": "project_fact",
    "project": "project_fact",
    "correction": "feedback",
    "pointer": "reference",
    "link": "reference",
}


# Words that say a statement replaces an earlier one ("8080 now, not 8000", "no longer").
_CORRECTION = re.compile(
    r"\b(now|no longer|not|instead|anymore|any more|changed|moved|switched|actually|"
    r"rather than|replaced|from now on|nowadays|these days|upgraded|downgraded|migrated)\b",
    re.IGNORECASE,
)


def _words(text: str) -> set[str]:
    """A description's index terms without numbers (what a correction keeps: the subject)."""
    return {t for t in tokenize(text) if not any(ch.isdigit() for ch in t)}


def corrected(store: Store, item: Memory) -> list[str]:
    """The memories ``item`` replaces. First the one it updates: an existing memory of the
    same type it clearly duplicates (near-identical description), or corrects — it says it
    replaces something ("now", "not", "no longer"…) and is about the same subject (most of its
    words, numbers aside, are that memory's); the new text then updates that memory, whose old
    version goes to history, instead of standing beside it. Then, when it is a correction,
    every other memory of the same type on the same subject (two "staging runs Postgres 16"
    beside "staging now runs Postgres 17"), which would otherwise be recalled as current."""
    mine = set(tokenize(item.description))
    if not mine:
        return []
    corrects = bool(_CORRECTION.search(f"{item.description} {item.body}"))
    subject = _words(item.description)
    found: list[str] = []
    for i, entry in enumerate(h.entry for h in store.search(item.description, 5, dense=False)):
        if i >= 3 and not found:
            break  # what it updates is among the three closest; the others it replaces may not be
        if entry.type != item.type or entry.name == item.name:
            continue
        theirs = set(tokenize(entry.description))
        words = _words(entry.description)
        same = len(mine & theirs) / len(mine | theirs) >= 0.8
        if (same and not found) or (
            corrects and subject and words and len(subject & words) / len(words) >= 0.6
        ):
            found.append(entry.name)
        if found and not corrects:
            break
    return found


# What a correction says it replaced: "from X to", "instead of X", "rather than X", "no
# longer X", "not X", "replaced X with" (X up to the clause's end).
_CLAUSE = r"(?:[^,.;:!?]|\.(?=\d))+"  # up to the clause's end ("3.11" is one value)
_REPLACED = re.compile(
    rf"\bfrom\s+({_CLAUSE}?)\s+to\b|\b(?:instead of|rather than|no longer|not)\s+({_CLAUSE})"
    rf"|\breplac\w*\s+({_CLAUSE}?)\s+with\b",
    re.IGNORECASE,
)
# a value: a number, a name written with a capital, a word with a digit in it ("eu-west-1")
_VALUE = re.compile(r"[\w.-]*\d[\w.-]*|[A-Z][\w.-]*")


def _replaced_values(text: str) -> set[str]:
    """Index terms of the values ``text`` says were replaced: the numbers and names in its
    "from X to", "instead of X", "not X"… phrases ("Jenkins", "16", "Papertrail"), and the
    one word of a "from X to" or "replaced X with" however it is written ("from yarn to")."""
    out: set[str] = set()
    for match in _REPLACED.finditer(text):
        phrase = next(g for g in match.groups() if g)
        out.update(t for v in _VALUE.findall(phrase) for t in tokenize(v))
        alone = _ARTICLE.sub("", phrase).split()
        if (match.group(1) or match.group(3)) and len(alone) == 1:
            out.update(tokenize(alone[0]))
    return out


_ARTICLE = re.compile(r"^\s*(?:the|a|an|our|my|your|their|its)\s+", re.IGNORECASE)


def stale_by_correction(store: Store, item: Memory, said: str) -> list[str]:
    """Memories the user's own correction makes stale beside ``item`` (the fact learned from
    it), however the model worded it: the user said a value was replaced ("we switched CI from
    Jenkins to GitHub Actions"); a memory that holds that value and half of whose other words
    are the correction's ("CI runs on Jenkins") no longer holds. A value is a number or a
    capitalised name, so "Production runs Postgres 17" is not stale because staging moved
    "from Postgres 16 to 17", nor "Node 16 on the build agents". Best match first."""
    text = f"{item.description} {item.body}"
    about = set(tokenize(_REPLACED.sub(" ", text))) - _GENERIC_WORDS  # what holds now
    gone: set[str] = set()
    for sentence in [*re.split(r"(?<=[.!?])\s+|\n+", said), text]:
        if _CORRECTION.search(sentence) and set(tokenize(sentence)) & about:  # corrects it
            gone |= _replaced_values(sentence)
            about |= set(tokenize(_REPLACED.sub(" ", sentence))) - _GENERIC_WORDS
    gone -= about
    if not gone:
        return []
    found: list[str] = []
    for hit in store.search(" ".join(sorted(gone | about)), 10, dense=False):
        entry = hit.entry
        theirs = set(tokenize(entry.description)) - _GENERIC_WORDS
        rest = theirs - gone  # its words, the replaced value aside
        if entry.name == item.name or entry.pinned or not theirs & gone or not rest:
            continue
        if len(rest & about) * 2 >= len(rest):
            found.append(entry.name)
    return found


def borrowed_description(store: Store, item: Memory) -> str | None:
    """Why ``item`` pairs another memory's description with a body about something else (a
    model copies a recalled memory's line, then writes a new fact under it), or None. Saved,
    it would update that memory with the unrelated text, or describe the new fact wrongly in
    every catalogue."""
    mine = set(tokenize(item.description))
    body = set(tokenize(item.body))
    if not mine or not body:
        return None
    for entry in (h.entry for h in store.search(item.description, 3, dense=False)):
        theirs = set(tokenize(entry.description))
        if entry.name == item.name or len(mine & theirs) / len(mine | theirs) < 0.8:
            continue
        about = theirs | set(tokenize(store.get(entry.name).body))
        if len(body & about) / len(body) < 0.25 and len(body & mine) / len(body) < 0.25:
            return (
                f"the description is memory {entry.name}'s ({entry.description!r:.80}) but the"
                " body is about something else — give this body a one-line description of its own"
            )
    return None


MAX_ITEMS = 20  # items taken from one reply; a flood of items is a broken or hostile reply
_PLACEHOLDERS = {
    "",
    "...",
    "…",
    "n/a",
    "na",
    "none",
    "null",
    "todo",
    "tbd",
    "body",
    "text",
    "description",
    "details",
    "content",
    "memory",
    "placeholder",
    "-",
}


def short_name(text: str, taken: set[str]) -> str:
    """A short, valid name made of the first informative words of ``text``, distinct from
    ``taken``."""
    words = [
        w for w in re.findall(r"\w+", text.lower()) if w not in STOP_WORDS and w not in _TYPE_WORDS
    ][:5]
    base = slugify(" ".join(words) or text)[:48].strip("-_") or "memory"
    base = valid_name(base) or valid_name(f"note-{base}") or "note"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def name_for(raw_name: str, description: str, types: tuple[str, ...], taken: set[str]) -> str:
    """The model's name when it is a usable one; else a short name derived from the text.

    Not usable: invalid, a type name (``user_preference``), a stop word, or a copy of a whole
    sentence."""
    name = valid_name(raw_name)
    if name is None:
        return short_name(raw_name or description, taken)
    words = [w for w in re.split(r"[-_]+", name.lower()) if w]
    generic = (
        name.lower() in {t.lower() for t in types}
        or any(t.lower() in name.lower() for t in types if "_" in t)  # a copied type name
        or name.lower() in TYPE_ALIASES
        or all(w in STOP_WORDS or w in _GENERIC_WORDS for w in words)
    )
    if generic or len(words) > 8:
        return short_name(description if generic else name.replace("-", " "), taken)
    if name not in taken:  # a new name is written as memdir writes names: lower-case-hyphens
        plain = re.sub(r"[_\s]+", "-", name.lower()).strip("-")
        name = valid_name(plain) or name  # (else the model's own valid name, as it is)
    return name


_TYPE_WORDS = {"user_preference", "project_fact"}  # a type's name is no word of a subject
_GENERIC_WORDS = {
    "memory",
    "memories",
    "note",
    "notes",
    "fact",
    "facts",
    "preference",
    "preferences",
    "user",
    "project",
    "info",
    "information",
    "item",
    "new",
}


def coerce(raw: Any, store: Store, taken: set[str]) -> tuple[str, Memory] | str:
    """(action, memory) from one item of the model's answer, or the reason it was dropped.
    Text is redacted here, so the plan shown to a person never holds a credential."""
    if not isinstance(raw, dict):
        return f"not an object: {raw!r:.60}"
    action = str(raw.get("action", "create")).lower()
    if action not in ("create", "update"):
        return f"unknown action {action!r:.40}"
    text = {
        k: redact(str(raw.get(k) or "").strip())[0] for k in ("name", "type", "description", "body")
    }
    for key in ("name", "description", "body"):
        text[key] = without_echo(text[key])
    if text["body"].lower().strip(" .") in _PLACEHOLDERS:
        text["body"] = ""
    if not text["body"] and not text["description"]:
        return f"{text['name'] or 'an item'} has neither description nor body"
    type_ = kind_of(text["type"])
    if type_ not in store.config.types:
        type_ = "project_fact" if "project_fact" in store.config.types else store.config.types[0]
    description = one_line(text["description"] or text["body"])
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    name = name_for(text["name"], description, store.config.types, taken)
    return action, Memory(name, type_, description, text["body"] or description)


# What a model copies back from the catalogue it was shown ("- name (type) [user]: text") or
# from the conversation's labels and acknowledgements ("Project fact:", "Understood:").
_CATALOGUE_ECHO = re.compile(
    r"^\s*(?:[-*]\s+|\d+\.\s+)?(?:[\w-]+\s+\([\w ,:-]+\)"  # "name (anything)"
    r"|(?:[\w'-]+\s+){0,4}[\w'-]+\s+\((?:project[ _]fact|user[ _]preference|feedback|reference)"
    r"(?:,\s*[\w-]+)?\))"  # "a few words (a type)"
    r"\s*(?:\[[\w:-]+\])?\s*[:—-]\s*",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^\s*(?:project[ _]fact|user[ _]preference|feedback|reference|fact|preference|correction|"
    r"note|remember(?: that)?|understood|noted|thanks,? noted|got it|okay|ok|sure)\s*[:,!.—-]\s*",
    re.IGNORECASE,
)


def without_echo(text: str) -> str:
    """``text`` without the catalogue formatting or the label a model copied in front of it."""
    for _ in range(3):
        cleaned = _LABEL.sub("", _CATALOGUE_ECHO.sub("", text, count=1), count=1)
        if cleaned == text or not cleaned.strip():
            break
        text = cleaned
    return text.strip()


def in_users_language(mem: Memory, said: str) -> Memory:
    """A memory from a Chinese, Japanese or Korean conversation that the model wrote in
    another language keeps the user's own words too (small models often translate)."""
    letters = [ch for ch in said if ch.isalpha()]
    if not letters or len(CJK_CHAR.findall(said)) < 0.3 * len(letters):
        return mem
    if CJK_CHAR.search(mem.description + mem.body):
        return mem
    words = redact(one_line(said))[0][:500]
    return mem.replace(body=f"{mem.body}\n\n> {words}")


# words a memory uses to frame what its person said: never evidence of who said it
_FRAME = frozenset(
    tokenize(
        "user users person people they prefers prefer preferred preference wants want likes"
        " like always never should must use uses using asked asks said says project team"
    )
) | frozenset("用户希望喜欢偏好总是要求的了")


def _evidence(text: str) -> set[str]:
    """What a text is made of, for telling who said it: index terms, CJK characters one by
    one (a restatement keeps the characters, not the pairs a word boundary makes)."""
    out = {t for t in tokenize(text) if not CJK_CHAR.match(t)}
    out.update(CJK_CHAR.findall(text))
    return out - _FRAME


# the user saying what they prefer, in their own words ("I want you to…" asks for work here)
_PREFERS = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|always\s+|generally\s+)?"
    r"(?:prefer|(?:like|love|want)(?!\s+(?:you|us|everyone|the team|all)\b)|favou?r)\b|"
    r"\bi'?d\s+rather\b|\bmy\s+(?:preference|preferred|favou?rite)\b|"
    r"我(?:更|比较|一直)?(?:喜欢|偏好|倾向|习惯)|私は.{0,10}(?:好き|好む)",
    re.IGNORECASE,
)


def preferred_by_user(raw: dict[str, Any], said: str) -> bool:
    """Whether a proposed item restates a preference the user voiced ("I prefer 4-space
    indentation…"): a sentence of theirs that says so carries a third of what the item says.
    Such an item is the person's preference whatever kind a small model gave it."""
    terms = _evidence(f"{raw.get('description') or ''}\n{raw.get('body') or ''}")
    return any(_PREFERS.search(s) and _carried(terms, s) for s in _sentences(said))


# the assistant refusing or promising not to do something: its own commitment, not a fact (a
# promise to do what the user asked restates the user's request, and is kept)
_PROMISE = re.compile(
    r"\bi(?: won't| will not| can't| cannot| am not going to|'m not going to| shan't)\b|"
    r"我(?:不会|不能|不要)",
    re.IGNORECASE,
)


def assistants_promise(raw: dict[str, Any], said: str, replied: str) -> bool:
    """Whether a proposed item is the assistant's refusal or promise not to ("…I won't store
    the password"): such a sentence of the assistant's carries at least half of it, and more
    of it than the user's own words (``said``) do."""
    terms = _evidence(f"{raw.get('description') or ''}\n{raw.get('body') or ''}")
    if not terms:
        return False
    users = len(terms & _evidence(said))
    for sentence in _sentences(replied):
        if _PROMISE.search(sentence):
            theirs = len(terms & _evidence(sentence))
            if 2 * theirs >= len(terms) and theirs > users:
                return True
    return False


# what a user passes on from elsewhere: a fenced block, a quoted line, what a source "says:"
_FENCE = re.compile(r"```.*?(?:```|$)|~~~.*?(?:~~~|$)", re.DOTALL)
_QUOTED_LINE = re.compile(r"(?m)^\s*>.*$")
_SAYS = re.compile(
    r"(?im)\b(?:says|said|reads|writes|wrote|states|stated|mentions|claims|puts it)\s*:\s*.*$"
)
_IN_QUOTES = re.compile(r"[\"“«„]([^\"”»“]{20,})[\"”»“]")


def unquoted(text: str) -> str:
    """The user's own words in ``text``: without what they pasted or quoted from elsewhere
    (fenced blocks, ``>`` lines, what a file or a person "says:", long passages in quotes). A
    rule only a quotation carries is not the user's instruction."""
    for pattern in (_FENCE, _QUOTED_LINE, _SAYS, _IN_QUOTES):
        text = pattern.sub(" ", text)
    return text


def said_by_user(item: Memory, said: str) -> bool:
    """Whether the user's own words (``said``: their messages in the learned part of the
    conversation) carry ``item``: at least a third of what it says is in them (a model
    restates what it heard in its own words). A memory of the assistant's words alone (its
    promise, its suggestion) is not the user's."""
    return _carried(_evidence(f"{item.description}\n{item.body}"), said)


def _carried(terms: set[str], said: str) -> bool:
    """Whether ``said`` holds at least a third of ``terms`` (any words at all, for none)."""
    if not terms:
        return bool(said.strip())
    return 3 * len(terms & _evidence(said)) >= len(terms)


def _sentences(text: str) -> list[str]:
    """``text`` cut after each sentence's end (Latin or CJK) and at line breaks."""
    return re.split(r"(?<=[.!?。！？])\s*|\n+", text)


def kind_of(raw_type: str) -> str:
    """A type as the model wrote it, in the store's spelling where an alias says so."""
    kind = raw_type.strip().lower().replace(" ", "_")
    return TYPE_ALIASES.get(kind, kind)
