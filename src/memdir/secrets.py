"""Credential detection and redaction, applied before any memory text is written.

Known token formats (cloud and API keys, chat and payment tokens, JWTs, private keys),
passwords in URLs and in assignments, and high-entropy tokens are found. Look-alikes that are
common in developer conversations (commit hashes, UUIDs, base64 of ordinary text) are left alone.
This module does NOT decide whether to refuse or redact: callers do (manual paths refuse,
automatic paths redact).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import SecretFound

# (kind, pattern, group holding the secret: 0 = the whole match)
_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    ("private key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"), 0),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}\b"), 0),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_\w{22,255})"), 0),
    ("GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), 0),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("Slack webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}"), 0),
    ("Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0),
    ("API key", re.compile(r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), 0),
    ("Google OAuth token", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), 0),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 0),
    ("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),
    ("SendGrid key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), 0),
    ("Twilio key", re.compile(r"\bSK[0-9a-f]{32}\b"), 0),
    ("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    ("password in URL", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:([^\s@/]{3,})@"), 1),
    ("Azure connection string",
     re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,})"), 1),
    ("password", re.compile(
        r"(?i)(?:(?<![a-z0-9])(?:password|passwd|pwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey"
        r"|access[_-]?key|access[_-]?token|auth[_-]?token|token|client[_-]?secret"
        r"|private[_-]?key)(?![a-z0-9])|密码|口令|密钥|令牌)"
        r"[\"']?\s*(?:[:=：]|\bis\b|是|为)\s*[\"']?([^\s\"',;，。]{6,})"), 1),
]

_PLACEHOLDER = re.compile(
    r"^(?:[$<{%(\[]|\*+$|x+$|\.{3}|os\.|env\.|process\.env|getenv|none$|null$|true$|false$"
    r"|required$|optional$|redacted|example|placeholder|your[_-]|changeme$|secret$|password$)",
    re.IGNORECASE,
)
_CANDIDATE = re.compile(r"(?<![\w/+=\-.])[A-Za-z0-9+/_\-]{24,}={0,2}(?![\w/+=\-])")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class Finding:
    """One credential found in a text (positions of the secret part only)."""

    kind: str
    start: int
    end: int


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def _is_text_base64(token: str) -> bool:
    """Whether the token is base64 of ordinary text (a look-alike, not a secret)."""
    padded = token + "=" * (-len(token) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_" if "-" in token or "_" in token else None,
                               validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in decoded)
    return printable >= 0.95 * max(1, len(decoded))


def _looks_random(token: str) -> bool:
    """High-entropy token test, tuned to spare hashes, UUIDs, identifiers and paths."""
    core = token.rstrip("=")
    if len(core) < 24 or _HEX.match(core) or _UUID.match(core):
        return False
    if "/" in core and all(part.isalpha() or not part for part in core.split("/")):
        return False  # a path of words
    classes = sum((any(c.islower() for c in core), any(c.isupper() for c in core),
                   any(c.isdigit() for c in core)))
    digits = sum(c.isdigit() for c in core)
    if classes < 2 or (classes == 2 and (len(core) < 32 or not 0.1 <= digits / len(core) <= 0.7)):
        return False  # two character classes only count when long with digits mixed in
    if re.search(r"[a-z]{3,}(?:[_\-][a-z]{3,}){2,}", core, re.IGNORECASE) and _entropy(core) < 4.3:
        return False  # snake or kebab case words
    if _is_text_base64(core):
        return False
    return _entropy(core) >= 4.0 and digits >= 2


def scan(text: str) -> list[Finding]:
    """Every credential in ``text``, by position, without overlaps."""
    found: list[Finding] = []

    def overlaps(a: int, b: int) -> bool:
        return any(a < f.end and f.start < b for f in found)

    for kind, pattern, group in _PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span(group)
            value = m.group(group)
            if kind == "password" and (_PLACEHOLDER.match(value) or (value.isalpha() and
                                       value.islower() and len(value) < 10)):
                continue
            if not overlaps(start, end):
                found.append(Finding(kind, start, end))
    for m in _CANDIDATE.finditer(text):
        if _looks_random(m.group(0)) and not overlaps(*m.span()):
            found.append(Finding("high-entropy token", *m.span()))
    found.sort(key=lambda f: f.start)
    return found


def redact(text: str) -> tuple[str, list[Finding]]:
    """``text`` with every credential replaced by ``[REDACTED:<kind>]``, and what was found."""
    findings = scan(text)
    out, pos = [], 0
    for f in findings:
        out.append(text[pos : f.start])
        out.append(f"[REDACTED:{f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out), findings


def refuse_secrets(fields: Mapping[str, str]) -> None:
    """Raise SecretFound naming the field and kind if any field holds a credential."""
    for field_name, text in fields.items():
        findings = scan(text)
        if findings:
            kinds = ", ".join(sorted({f.kind for f in findings}))
            raise SecretFound(
                f"the {field_name} looks like it contains a credential ({kinds}) — remove it,"
                " or store it anyway with --allow-secret (secrets=\"allow\" in Python)"
            )
