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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import SecretFound
from .safetext import CJK_CHAR

# (kind, pattern, group holding the secret: 0 = the whole match). Token formats follow the
# prefixes their issuers document (the same ones secret scanners such as gitleaks look for).
_TOKENS: list[tuple[str, str]] = [
    ("AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}\b"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_\w{22,255})"),
    ("GitLab token", r"\bgl(?:pat|rt|dt|ft|cbt|ptt|oas)-[A-Za-z0-9_\-]{20,}"),
    ("Slack token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    ("Slack webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}"),
    ("Stripe key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("API key", r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("Google OAuth token", r"\bya29\.[0-9A-Za-z_\-]{20,}"),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),
    ("SendGrid key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("Twilio key", r"\bSK[0-9a-f]{32}\b"),
    ("Shopify token", r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
    ("DigitalOcean token", r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    ("Vault token", r"\bhv[sbr]\.[A-Za-z0-9_\-]{24,}"),
    ("Discord token", r"\b[MNO][A-Za-z\d_\-]{23,27}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,40}"),
    ("Mailgun key", r"\bkey-[0-9a-f]{32}\b"),
    ("Mailchimp key", r"\b[0-9a-f]{32}-us\d{1,2}\b"),
    ("Square token", r"\bsq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"),
    ("Databricks token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
    ("Atlassian token", r"\bATATT3[A-Za-z0-9_\-=]{100,}"),
    ("Linear key", r"\blin_api_[A-Za-z0-9]{40}\b"),
    ("Postman key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("Doppler token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9_.\-]{40,}"),
    ("Grafana token", r"\b(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8})"),
    ("New Relic key", r"\bNR(?:AK|AA|II)-[A-Z0-9]{27}\b"),
    ("Telegram bot token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),
    ("age key", r"\bAGE-SECRET-KEY-1[A-Z0-9]{58}\b"),
    ("Docker token", r"\bdckr_pat_[A-Za-z0-9_\-]{27,}"),
    ("Fly.io token", r"\bfo1_[A-Za-z0-9_\-]{43}"),
    ("Supabase token", r"\bsbp_[a-f0-9]{40}\b"),
    ("Pulumi token", r"\bpul-[a-f0-9]{40}\b"),
    ("Terraform token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,}"),
    ("Sentry token", r"\bsntr[ysu]_[A-Za-z0-9+/=_\-]{40,}"),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
]
# A passphrase of words after its label: "the passphrase is correct horse battery staple",
# "master password: Tiger-Lily-Orbit-Seven" (checked against ordinary words by _passphrase).
_PASSPHRASE = re.compile(
    r"(?i)(?<![a-z0-9])(?:pass ?phrase|password|passwd|pass ?word)(?![a-z0-9])"
    r"(?:\s+(?:for|of|on|to|at)\s+[^\n.:=]{1,40}?)?"
    r"\s*(?:\bis\b\s*:?|[:=])\s*[\"']?((?:[A-Za-z]{3,}[ \-]){2,7}[A-Za-z]{3,})"
    r"(?=[\"']?\s*(?:[.,;!?)]|$))",
    re.MULTILINE,
)
_PROSE_WORDS = frozenset(
    """
the a an in on at to of for is are was be been being not no none stored kept saved set same
required optional changed rotated reset empty blank hidden available there here this that it its
our your their my his her we you they with from by as and or but now still also only never
always just when then than if under above below different managed handled sent shared known
written given unknown expired missing wrong correct incorrect valid invalid strong weak long
short secure stored where what which who how please ask see check use using used via into
""".split()
) - {"correct"}


def _passphrase(value: str) -> bool:
    """Whether words after a password label are a passphrase rather than prose about it."""
    words = [w.lower() for w in re.split(r"[ \-]", value) if w]
    return (
        len(words) >= 3
        and not any(w in _PROSE_WORDS for w in words[:2])
        and sum(w in _PROSE_WORDS for w in words) <= 1
    )


_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        0,
    ),
    *[(kind, re.compile(rx), 0) for kind, rx in _TOKENS],
    ("password in URL", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:([^\s@/]{3,})@"), 1),
    (
        "Azure connection string",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,})"),
        1,
    ),
    (
        "HTTP credentials",
        re.compile(r"(?i)\bAuthorization:\s*(?:Basic|Bearer|Token)\s+([A-Za-z0-9._~+/=\-]{12,})"),
        1,
    ),
    (
        "password",
        re.compile(
            r"(?:\bcurl\b|\bwget\b|\bhttp\b)[^\n]*?\s(?:-u|--user)[ =]"
            r"[\"']?[^\s:\"']+:([^\s\"']{4,})"
        ),
        1,
    ),
    ("password", re.compile(r"\bmysql(?:dump|admin)?\b[^\n]*?\s-p([^\s\"']{4,})"), 1),
    # NAME=value where the name says it holds a secret (shells, .env files, CI settings)
    (
        "password",
        re.compile(
            r"(?i)\b[A-Z0-9_]*(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_?KEY"
            r"|PRIVATE_?KEY|_PWD|PGPASS)[A-Z0-9_]*\s*[:=]\s*[\"']?([^\s\"',;]{6,})"
        ),
        1,
    ),
    # prose and config in English: "the password for X is Y", "api key: Y", "login is u / Y"
    (
        "password",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:password|passwd|pwd|pw|passphrase|pass ?code|pass"
            r"|secret(?:[ _-]?key)?|api[ _-]?key|access[ _-]?(?:key|token)|auth[ _-]?token|token"
            r"|client[ _-]?secret"
            r"|private[ _-]?key|credentials?|login)(?![a-z0-9])"
            r"(?:\s+(?:for|of|on|to|at)\s+[^\n.:=]{1,40}?)?"
            r"[\"']?\s*(?:(?:\bis\b|\bare\b)\s*[:=]?|[:=])\s*[\"']?"
            r"(?:[^\s/:\"']{1,32}\s*(?:/|:)\s*)?([^\s\"',;]{6,})"
        ),
        1,
    ),
    (
        "password",
        re.compile(
            r"(?i)\b(?:credentials?|login)\s+(?:is\s+|are\s+)?"
            r"[^\s/]{1,32}\s*/\s*([^\s\"',;]{6,})"
        ),
        1,
    ),
    # no separator at all: "api key 4caf…", "password D3ploy#Stg" (only values shaped like keys)
    (
        "API key",
        re.compile(
            r"(?i)\b(?:api[ _-]?key|access[ _-]?token|secret[ _-]?key)\s+"
            r"(?=[a-z0-9_\-]*\d)([A-Za-z0-9_\-]{32,})\b"
        ),
        1,
    ),
    (
        "password",
        re.compile(
            r"(?i)\b(?:password|passwd|passphrase)\s+"
            r"(?=\S*\d)(?=\S*[A-Z!@#$%^&*])([^\s\"',;]{6,})"
        ),
        1,
    ),
    ("passphrase", _PASSPHRASE, 1),
    # Chinese and Japanese: 密码是 Y, パスワードは Y, ログインは u / Y
    (
        "password",
        re.compile(
            r"(?:密码|口令|密钥|令牌|秘钥|Secret|パスワード|暗証番号|APIキー|トークン|ログイン)"
            r"[^\n:：=是为は]{0,6}\s*(?:[:：=]|是|为|は)\s*"
            r"(?:[^\s/:：]{1,32}\s*/\s*)?([^\s\"',;，。、]{6,})"
        ),
        1,
    ),
]

_PLACEHOLDER = re.compile(
    r"^(?:[$<{%(\[]|\*+$|x+$|\.{3}|os\.|env\.|process\.env|getenv|none$|null$|true$|false$"
    r"|required$|optional$|redacted|example|placeholder|your[_-]|changeme$|secret$|password$"
    r"|bearer$|basic$|token$)",
    re.IGNORECASE,
)
_MARKER = re.compile(r"\[REDACTED:[^\]\n]{1,40}\]")
_CODE_VALUE = re.compile(
    r"^[A-Za-z_][\w.]*\(|\[[\"']|^[\[{(]|^[A-Za-z_]\w*(?:\.\w+)+[\[(]?$"  # call, index, attribute
    r"|^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$"  # another setting's NAME
    r"|^[a-z][a-z_]*$"  # a lowercase identifier or word
)


_WORDS_VALUE = re.compile(r"^[A-Za-z]+(?:-[A-Za-z]+)+$|^[a-z0-9_\-]+(?:/[a-z0-9_\-.]+)+$")


def _plausible_secret(value: str) -> bool:
    """Whether the value after a 'password is' names a secret rather than code or prose."""
    value = value.strip("\"'`").rstrip(".!?,;)")
    if len(value) < 6 or _PLACEHOLDER.match(value) or CJK_CHAR.search(value):
        return False
    if (
        value[0] in "?&*|>"
        or re.match(r"![A-Za-z]+$", value)
        or "${" in value
        or "}" in value
        or _WORDS_VALUE.match(value)
    ):
        return False  # a YAML tag or anchor, a shell expansion, a path or a name of words
    if _CODE_VALUE.search(value) and not (
        any(c.isdigit() for c in value) and not re.search(r"^[\w.]*\(|^[\[{(]", value)
    ):
        return False
    return not (value.isalpha() and value.islower())


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
        decoded = base64.b64decode(
            padded, altchars=b"-_" if "-" in token or "_" in token else None, validate=True
        ).decode("utf-8")
    except (binascii.Error, ValueError):  # (not base64, or not UTF-8 text)
        return False
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in decoded)
    return printable >= 0.95 * max(1, len(decoded))


# What stands right before a random-looking value that is public by nature: go.sum and SRI/npm
# integrity hashes, SSH public keys, fingerprints, base64 data URIs.
_PUBLIC_BEFORE = re.compile(
    r"(?:\bh1:|\bsha(?:1|256|384|512)-|\bSHA(?:1|256|384|512):|;base64,"
    r"|\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com)\s+)$"
)
# Words that say the value after them names something public: an id, an address, a digest.
_ID_CONTEXT = re.compile(
    r"(?i)\b(?:ids?|identifier|address|wallet|cid|playlist|digest|hash|checksum|commit|pin"
    r"|program|document|doc|page|sheet|spreadsheet|file|folder|video|form|channel|issue"
    r"|object|blob|tx|transaction|contract|build|trace|span"
    r"|event|zone|item|base|table|record|row)\b(?:\s+(?:is|was|of|for))?\s*[:=#]?\s*$"
)
# Addresses and content ids: bech32 wallets, IPFS CIDs.
_PUBLIC_FORM = re.compile(
    r"(?:bc|tb|ltc)1[02-9ac-hj-np-z]{20,}$|bafy[a-z2-7]{40,}$"
    r"|0x(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$"
    r"|Qm[1-9A-HJ-NP-Za-km-z]{44}$"
)
# Object ids of payment and chat APIs: random, but names of things, not keys to them.
_ID_PREFIX = re.compile(
    r"sha(?:1|256|384|512)-"
    r"|(?:cus|pi|ch|sub|prod|price|evt|acct|in|txn|seti|src|pm|re|po|ii|il"
    r"|cs_live|cs_test|plink|card|ba|btok|file|sku)_[A-Za-z0-9]{8,}$"
)


def _looks_random(token: str) -> bool:
    """High-entropy token test, tuned to spare hashes, UUIDs, identifiers and paths."""
    core = token.rstrip("=")
    if len(core) < 24 or _HEX.match(core) or _UUID.match(core) or _PUBLIC_FORM.match(core):
        return False
    if "/" in core and (
        core.startswith("/")
        or any(re.fullmatch(r"[a-z][a-z0-9._\-]{2,}|\d{1,4}", part) for part in core.split("/"))
    ):
        return False  # a path: a file, a store path, an object key (folders named in words)
    classes = sum(
        (
            any(c.islower() for c in core),
            any(c.isupper() for c in core),
            any(c.isdigit() for c in core),
        )
    )
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
    # Text redacted before (an earlier pass, a plan shown to the user) is left as it is.
    done = [m.span() for m in _MARKER.finditer(text)]

    def overlaps(a: int, b: int) -> bool:
        return any(a < f.end and f.start < b for f in found) or any(
            a < e and s < b for s, e in done
        )

    for kind, pattern, group in _PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span(group)
            value = m.group(group)
            if kind in ("password", "HTTP credentials") and not _plausible_secret(value):
                continue
            if kind == "passphrase" and not _passphrase(value):
                continue
            if kind == "password in URL" and _PLACEHOLDER.match(value):
                continue
            if not overlaps(start, end):
                found.append(Finding(kind, start, end))
    for m in _CANDIDATE.finditer(text):
        if _PUBLIC_BEFORE.search(text, max(0, m.start() - 40), m.start()):
            continue  # a checksum, a public key, inline data: random by design, not secret
        if _ID_PREFIX.match(m.group(0)) or _ID_CONTEXT.search(
            text, max(0, m.start() - 40), m.start()
        ):
            continue  # a named public id: a document, a wallet, a playlist, a trace
        if _looks_random(m.group(0)) and not overlaps(*m.span()):
            found.append(Finding("high-entropy token", *m.span()))
    found.sort(key=lambda f: f.start)
    return found


_RUN_END = re.compile(r"[^\s\"'`<>()\[\]{}]*")


def _whole(text: str, f: Finding) -> Finding:
    """A password found up to a character its pattern stops at (``;`` in ``&amp;``) runs on
    to the end of its word: the redaction takes the whole value."""
    if f.kind != "password":
        return f
    end = _RUN_END.match(text, f.end)
    stop = end.end() if end else f.end
    while stop > f.end and text[stop - 1] in ".,;:!?":
        stop -= 1
    return Finding(f.kind, f.start, stop)


_LABEL_WORD = re.compile(
    r"(?i)pass|secret|token|key|credential|login|pwd|\bpw\b|\bpin\b"
    r"|密码|口令|密钥|令牌|秘钥|パスワード|暗証|キー|トークン|ログイン"
)
_LABEL_TAIL = re.compile(r"\s*(?:\b(?:is|are)\b|[:=])?\s*\[REDACTED:[^\]\n]{1,40}\]\W*$")


def scan_labelled(label: str, value: str) -> list[Finding]:
    """Credentials in ``value`` that only its label (a memory's description or name, in
    another field) says are credentials: "The staging database password" over a body
    "Tr0ub4dor&3". Positions are in ``value``."""
    head = _LABEL_TAIL.sub("", label).rstrip(" .:;,-—")
    if not head or not _LABEL_WORD.search(head):
        return []  # a label that names no credential makes nothing after it one
    joined = f"{head}: {value}"
    offset = len(head) + 2
    return [
        Finding(f.kind, f.start - offset, f.end - offset) for f in scan(joined) if f.start >= offset
    ]


def redact(text: str, also: Sequence[Finding] = ()) -> tuple[str, list[Finding]]:
    """``text`` with every credential replaced by ``[REDACTED:<kind>]``, and what was found;
    ``also``: more findings in ``text`` (from ``scan_labelled``)."""
    findings = [_whole(text, f) for f in scan(text)]
    for extra in also:
        if not any(extra.start < f.end and f.start < extra.end for f in findings):
            findings.append(_whole(text, extra))
    findings.sort(key=lambda f: f.start)
    out, pos = [], 0
    for f in findings:
        out.append(text[pos : f.start])
        out.append(f"[REDACTED:{f.kind}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out), findings


def refuse_secrets(fields: Mapping[str, str], labels: Sequence[str] = ()) -> None:
    """Raise SecretFound naming the field and kind if any field holds a credential, also one
    that only a label in another field names (``labels``: the description, the name)."""
    for field_name, text in fields.items():
        findings = scan(text)
        if not findings and field_name == "body":
            findings = [f for label in labels for f in scan_labelled(label, text)]
        if findings:
            kinds = ", ".join(sorted({f.kind for f in findings}))
            raise SecretFound(
                f"the {field_name} looks like it contains a credential ({kinds}) — remove it,"
                ' or store it anyway with --allow-secret (secrets="allow" in Python)'
            )


_IDS = frozenset({"id", "tool_use_id", "tool_call_id"})  # random by design, never secrets


def redact_tree(value: object) -> object:
    """Every string in a JSON-like value (messages, frontmatter) redacted; a ``body`` beside
    a ``description`` or ``name`` is screened with them as its labels (a tool call's memory)."""
    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, dict):
        out = {k: v if k in _IDS else redact_tree(v) for k, v in value.items()}
        body = value.get("body")
        if isinstance(body, str):
            labels = [
                str(out[k]).replace("_", " ").replace("-", " ")
                for k in ("description", "name")
                if isinstance(out.get(k), str)
            ]
            out["body"] = redact(body, [f for label in labels for f in scan_labelled(label, body)])[
                0
            ]
        return out
    if isinstance(value, (list, tuple)):
        return [redact_tree(v) for v in value]
    return value
