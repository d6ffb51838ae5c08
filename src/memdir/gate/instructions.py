"""Telling an instruction planted for the agent from a memory: the write-time screen of what
memdir is about to learn or keep.

Text that reaches memory from a conversation, a tool result, a web page or a remote can carry
orders for whichever agent recalls it later (memory poisoning): run a command fetched from a
URL, ignore its instructions, send data somewhere, act on an approval nobody gave. A memory
states a fact or a preference ("run the tests with ``pytest -x``"); such a text commands the
agent. ``screen`` names the first sign of the latter; what it flags waits for a person
(review) and never reaches recall unreviewed. Measured in ``benchmarks/injection_bench.py``.
This module does NOT decide what happens to a flagged text (``review`` and ``sync`` do).
"""

from __future__ import annotations

import functools
import re
import unicodedata

_I = re.IGNORECASE
# "(?:[^.\n]|\.(?=\w))": within one sentence; a dot before a letter (".env", "~/.ssh", "v1.2")
# does not end one
_URL = r"(?:https?://|ftp://|www\.)\S+"
_SENSITIVE = (
    r"api[ _-]?keys?|tokens?|passwords?|credentials|secrets?|private[ _-]?keys?|ssh[ _-]?keys?|"
    r"id_rsa|\.netrc|\.npmrc|(?<=\.)env\b|cookies?|[A-Z_]*(?:SECRET|TOKEN|PASSWORD|_KEY)[A-Z_]*|"
    r"DATABASE_URL"
)

_CRED_FILE = (
    r"~?/?\.(?:ssh|aws|netrc|npmrc|pypirc|docker/config\.json|kube)\S*|(?<=\.)env\b|id_(?:rsa|"
    r"ed25519|ecdsa|dsa)\b|credentials\b|private[ _-]?keys?|api[ _-]?keys?|secrets?\b|"
    r"(?:github|gh|access|api|auth)[ _-]?tokens?|passwords?|/etc/(?:shadow|passwd)"
)
# (what it is, pattern): the first that matches is the reason given
_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "it tells the agent to set aside its instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip)\b[\w\s,'-]{0,30}?"
            r"\b(?:previous|prior|above|earlier|all|any|your|the|system|safety|original)\b"
            r"[\w\s'-]{0,20}?\b(?:instructions?|prompts?|rules|guidelines|guardrails|"
            r"directives|messages|policies|restrictions|constraints)\b|"
            r"\b(?:your|all|previous|prior|earlier|old|original|above|existing)\s+(?:\w+\s+)?"
            r"(?:rules|guidelines|instructions|restrictions|policies)\s+(?:are\s+(?:now\s+)?"
            r"(?:void|obsolete|cancelled|canceled|revoked|suspended)|(?:no\s+longer|do\s+not|"
            r"don'?t)\s+apply)",
            _I,
        ),
    ),
    (
        "it pipes a download into a shell",
        re.compile(
            r"\b(?:curl|wget|iwr|invoke-webrequest|fetch)\b[^\n|;]{0,200}\|\s*(?:sudo\s+)?"
            r"(?:ba|z|k|da)?sh\b|\b(?:ba|z)?sh\s+(?:-c\s+)?[\"']?\$?\(\s*(?:curl|wget)\b|"
            r"\b(?:bash|sh)\s+<\(\s*(?:curl|wget)|\biex\s*\(|\binvoke-expression\b|"
            r"\beval\s*[\"'(]?\$\(\s*(?:curl|wget)",
            _I,
        ),
    ),
    (
        "it asks to send data somewhere",
        re.compile(
            r"\b(?:send|upload|post|forward|email|e-mail|exfiltrate|transmit|leak|share|copy|"
            r"paste|report)\b[^\n]{0,80}?\b(?:to|into|at|onto|with)\s+(?:" + _URL + r"|"
            r"(?:my|our|this|an?)\s+(?:server|endpoint|webhook|url|site|address|inbox|bucket|"
            r"pastebin|gist)|(?:an?\s+|the\s+)?public\s+(?:gist|repo\w*|issue|paste\w*|"
            r"channel|page|url)|third[ -]part(?:y|ies))|"
            r"\b(?:send|upload|post|forward|email|e-mail|exfiltrate|transmit|leak|share|copy)\b"
            r"[^\n]{0,60}?\b(?:" + _SENSITIVE + r"|contents|everything|every\s+file|all\s+"
            r"(?:files|logs|data|secrets|messages)|conversation|history|dump)\b[^\n]{0,60}?"
            r"[\w.+-]+@[\w-]+\.[\w.]+|"
            r"\$\(\s*cat\s+[^)]*(?:\.ssh|\.aws|credentials|id_rsa|\.env|token|secret)|"
            r"\b(?:enter|paste|submit|type|fill\s+in)\b(?:[^.\n]|\.(?=\w)){0,40}?\b(?:credentials|"
            r"passwords?|tokens?|api[ _-]?keys?|secrets?)\b",
            _I,
        ),
    ),
    (
        "it asks for credentials or secrets to be revealed",
        re.compile(
            r"\b(?:print|reveal|show|dump|output|display|send|paste|cat|echo|read out|list)\b"
            r"(?:[^.\n]|\.(?=\w)){0,40}?\b(?:api[ _-]?keys?|tokens?|passwords?|credentials|"
            r"secrets?|"
            r"private[ _-]?keys?|ssh[ _-]?keys?|id_rsa|(?<=\.)env\b|env(?:ironment)? "
            r"(?:variables|vars)|aws_secret|cookies?)\b|"
            r"\b(?:copy|write|put|echo|paste|print|add|insert|include|log|dump)\b(?:[^.\n]|\.(?=\w)){0,50}?"
            r"(?:" + _SENSITIVE + r")(?:[^.\n]|\.(?=\w)){0,40}?\b(?:into|in|to)\s+(?:the\s+|a\s+)?"
            r"(?:\w+\s+)?(?:pull\s+request|pr|readme|commit|issue|comment|description|log|"
            r"output|chat|message|docs?|wiki|ci)\b",
            _I,
        ),
    ),
    (
        "it claims an approval or permission the user did not give here",
        re.compile(
            r"\b(?:i|we|the user|user|admin|owner|operator)\s+(?:has\s+|have\s+)?"
            r"(?:already\s+|hereby\s+|pre-?)?(?:approved?|authori[sz]ed?|permits?|"
            r"permitted|allows?|allowed|consents?|consented|grants?\s+permission)\b"
            r"(?:[^.\n]|\.(?=\w)){0,60}?\b(?:run|running|execute|executing|it|this|that|all|any|every|"
            r"commands?|you|without|shar\w*|send\w*|upload\w*)\b|"
            r"\b(?:[\w-]+\s+){0,2}(?:has|have)\s+(?:already\s+)?(?:approved|authori[sz]ed|"
            r"permitted|allowed|cleared)\s+you\b|"
            r"\b(?:permission|approval|consent)\s+(?:was|has\s+been|had\s+been|is)\s+"
            r"(?:already\s+)?(?:given|granted)\b(?:[^.\n]|\.(?=\w)){0,80}?\b(?:confirm\w*|ask\w*|skip\w*|"
            r"every|all|any)\b|"
            r"\b(?:no need to|don'?t|do not|never|without)\s+(?:ask(?:ing)?|confirm(?:ing)?|"
            r"check(?:ing)?\s+with|prompt(?:ing)?)\b(?:[^.\n]|\.(?=\w)){0,30}?\b(?:permission|"
            r"confirmation|approval|the user|me|first|before|again)\b|"
            r"\byou\s+(?:are|have\s+been)\s+(?:now\s+)?(?:authori[sz]ed|allowed|permitted|"
            r"cleared)\s+to\b|\b(?:auto|pre)-?approved?\b",
            _I,
        ),
    ),
    (
        "it speaks as the system or opens new instructions",
        re.compile(
            r"\bimportant\s+system\s+\w+|\bsystem\s+(?:note|prompt|message|override|"
            r"instruction|update|notice|directive)s?\s*:|\bsystem\s+override\b|"
            r"(?:^|\n)\s*\[?\s*system\s*\]?\s*:|<\s*/?\s*(?:system|instructions?|im_start|"
            r"admin)\s*>|\bnew\s+(?:instructions?|directives?|rules)\s*:|\[\s*(?:system|inst)"
            r"\s*\]|\byou\s+are\s+now\s+(?:in\s+)?(?:\w+\s+){0,2}(?:mode|dan|unrestricted|"
            r"jailbroken)\b|\bdeveloper\s+mode\b(?:[^.\n]|\.(?=\w)){0,30}\b(?:on|enabled|session|"
            r"restrictions|ignore)|\bfrom\s+now\s+on,?\s+(?:you|the\s+(?:assistant|agent|ai))"
            r"\s+(?:must|will|should|shall)\b",
            _I,
        ),
    ),
    (
        "it tells the agent to turn off a safeguard",
        re.compile(
            r"\b(?:disable|turn\s+off|switch\s+off|deactivate|remove|bypass|circumvent)\b"
            r"(?:[^.\n]|\.(?=\w)){0,30}?\b(?:review|approvals?|sandbox|safety|guard(?:rail)?s?|filters?|"
            r"confirmations?|permission\s+checks?|security\s+checks?|antivirus|firewall|"
            r"logging|audit)\b|\b(?:review|approvals?|sandbox|safety\s+\w+|guardrails|"
            r"confirmations?)\s+(?:is|are|has\s+been|have\s+been)\s+(?:now\s+)?(?:disabled|"
            r"off|turned\s+off|switched\s+off|no\s+longer\s+(?:required|needed))\b",
            _I,
        ),
    ),
    (
        "it tells the agent to fetch and run something from a URL",
        re.compile(
            r"\b(?:run|execute|exec|source|(?:download|fetch|load|get)\s+and\s+"
            r"(?:run|execute|install|apply))\b(?:[^.\n]|\.(?=\w)){0,60}?"
            + _URL
            + r"|"
            + _URL
            + r"(?:[^.\n]|\.(?=\w)){0,60}?\b(?:and|then)\s+"
            r"(?:run|execute|follow|enter|paste|submit)\b",
            _I,
        ),
    ),
    (
        "it tells the agent to set aside its instructions (in another language)",
        re.compile(
            # Chinese
            r"(?:忽略|无视|無視|不要理会|不要理會|忘记|忘記|不用管|别管|別管)[^。\n]{0,20}?"
            r"(?:指令|指示|规则|規則|提示|要求|说明|說明|设定|設定)|"
            # Japanese
            r"(?:指示|ルール|命令|プロンプト|規則)[^。\n]{0,12}?(?:無視|忘れ)|"
            r"(?:ユーザー|利用者)の(?:指示|要求)より[^。\n]{0,20}?優先|"
            # Korean
            r"(?:지시|지침|규칙|명령|프롬프트)(?:[^.\n]|\.(?=\w)){0,12}?(?:무시|잊어)|"
            # Spanish
            r"\b(?:ignora|ignore|olvida|olvide|haz\s+caso\s+omiso\s+de|omite|descarta)\b"
            r"(?:[^.\n]|\.(?=\w)){0,30}?\b(?:instrucciones|reglas|indicaciones|normas|directrices)\b|"
            # French
            r"\b(?:ignore|ignorez|oublie|oubliez|ne\s+tiens?\s+pas\s+compte|ne\s+tenez\s+pas"
            r"\s+compte)\b(?:[^.\n]|\.(?=\w)){0,30}?\b(?:instructions|règles|consignes|directives)\b|"
            # Russian
            r"(?:игнорируй|игнорируйте|забудь|забудьте|не\s+обращай)(?:[^.\n]|\.(?=\w)){0,30}?"
            r"(?:инструкци|правил|указани)",
            _I,
        ),
    ),
    (
        "it runs a downloaded or decoded script",
        re.compile(
            r"\b(?:curl|wget)\b[^\n]{0,120}?(?:-o\s*|-O\s+|--output[ =]|>\s*)(\S+)[^\n]{0,80}?"
            r"(?:&&|;|\bthen\b|,)\s*(?:\w+\s+\S+\s*&&\s*)?(?:sudo\s+)?(?:ba|z|k|da)?sh\s+|"
            r"\b(?:curl|wget)\b[^\n]{0,160}?(?:&&|;|\bthen\b)[^\n]{0,60}?(?:\b(?:python3?|node|"
            r"perl|ruby|bash|sh)\s+\S+\.(?:py|js|pl|rb|sh)\b|\./\S+\.sh\b)|"
            r"\bbase64\s+(?:-d|--decode|-D)\b[^\n|]{0,40}\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b|"
            r"\b(?:exec|eval)\s*\([^\n]{0,60}?\b(?:urlopen|requests\.get|urllib|fetch|"
            r"http\.client)\b|"
            r"(?:^|\s)(?:curl|wget)\s[^\n|]{0,150}\|\s*(?:python3?|node|perl|ruby)\b",
            _I,
        ),
    ),
    (
        "it puts a credential file where others read it",
        re.compile(
            r"\b(?:append|add|put|paste|copy|insert|include|attach|write|dump|cat|post)\b"
            r"(?:[^.\n]|\.(?=\w)){0,60}?(?:"
            + _CRED_FILE
            + r")(?:[^.\n]|\.(?=\w)){0,60}?\b(?:into|in|to|onto)\s+(?:the\s+"
            r"|a\s+|an\s+|each\s+|every\s+)?(?:\w+\s+){0,2}(?:pr|pull\s+request|description|"
            r"commit(?:\s+message)?|issue|comment|readme|wiki|notes?|docs?|chat|channel|gist|"
            r"log|changelog|release)\b|"
            r"(?:发送|上传|上傳|发到|發到|传到|傳到|提交到|envía|envia|envoie|envoyez|"
            r"отправь|отправьте|送信|보내|publica)[^\n]{0,60}?(?:" + _URL + r"|@)|"
            r"(?:密钥|密鑰|秘密鍵|비밀번호|пароль|clés|claves)[^\n]{0,40}?(?:发送|上传|送信|"
            r"보내|출력|отправ|envoie|envía)|"
            r"(?:输出|출력|打印)[^\n]{0,10}?(?:密码|密碼|비밀번호|密钥)|"
            r"(?:비밀번호|密码|密碼)[^\n]{0,10}?(?:출력|输出|打印)",
            _I,
        ),
    ),
    (
        "it hides a request in an image link",
        re.compile(r"!\[[^\]\n]*\]\(\s*https?://[^)\s]*(?:\{|\$\{|%7B|<)[^)]*\)", _I),
    ),
    (
        "it drops a safeguard the user relies on",
        re.compile(
            r"\b(?:no\s+longer|not|never|don'?t|do\s+not)\s+(?:need\s+to\s+|have\s+to\s+|"
            r"required\s+to\s+)?(?:confirm|ask|check|double-?check)\w*\b(?:[^.\n]|\.(?=\w)){0,40}?"
            r"\b(?:destructive|delet\w*|force|rm\b|drop|with\s+the\s+user|before)|"
            r"\b(?:confirmations?|approval|safety\s+\w+|double-?checks?)\b(?:[^.\n]|\.(?=\w)){0,50}?"
            r"\b(?:(?:is|are)\s+not\s+(?:required|needed)\s+(?:any\s*more|anymore)|waived|"
            r"pre-?cleared|no\s+longer\s+(?:required|needed))|"
            r"\bpre-?cleared\b|\bno\s+need\s+to\s+(?:double-?)?check\s+with\s+the\s+user\b|"
            r"(?:no\s+pidas|sin\s+pedir|sans\s+demander|без\s+подтверждения|不要询问|无需确认|"
            r"不用确认|確認せず|확인\s*없이)",
            _I,
        ),
    ),
    (
        "it claims authority over the user's own instructions",
        re.compile(
            r"\b(?:these|this|the)\s+(?:rules?|instructions?|memory|memories|note|file)\b"
            r"(?:[^.\n]|\.(?=\w)){0,30}?\b(?:have|has|take|takes)\s+(?:priority|precedence)\s+over\b"
            r"(?:[^.\n]|\.(?=\w)){0,30}?\b(?:user|anything|everything|all)\b|"
            r"\b(?:override|overrides|outrank|outranks|supersede|supersedes|trump|trumps)\b"
            r"(?:[^.\n]|\.(?=\w)){0,20}?\bthe\s+user'?s?\b|"
            r"\b(?:do\s+not|don'?t|never)\s+(?:follow|read|obey|use)\s+(?:the\s+)?"
            r"(?:claude\.md|agents\.md|the\s+user'?s?\s+(?:instructions|requests|rules))|"
            r"\bignore\s+(?:the\s+)?(?:claude\.md|agents\.md)\b|"
            r"\b(?:the\s+)?user'?s?\s+(?:own\s+)?(?:words|instructions|requests)\s+should\s+be"
            r"\s+(?:disregarded|ignored)\b",
            _I,
        ),
    ),
)


# Signs that only count together: text addressed to the agent, claimed authority, secrecy
# from the user, a safeguard waived, something sensitive handed out.
_AGENT = r"(?:ai|assistants?|agents?|claude|codex|gpt|chatgpt|copilot|llms?|bots?|models?)"
_TO_AGENT = re.compile(
    r"(?:^|[.!?:;]\s+|\b(?:to|for|attention|note\s+to|hi|hey|dear|hello)\s+(?:any\s+|all\s+"
    r"|the\s+)?)" + _AGENT + r"\b|\b(?:ai|the)\s+(?:assistants?|agents?)\s+(?:must|should|"
    r"shall|will|may|can|are|have|working)\b|\byour\s+(?:task|job|role|instructions|orders)\b|"
    r"\bif\s+you\s+are\s+(?:an?\s+)?" + _AGENT + r"\b|\bwhoever\s+(?:reads|processes|sees)\b|"
    r"^\s*" + _AGENT + r"\s*[,:]|\b(?:you|agents?|assistants?)\s+(?:must|should|shall)\s+now\b|"
    r"\byou\s+(?:may|can)\s+now\b|\b(?:you|agents?|assistants?)\s+(?:must|should)\s+"
    r"(?:store|post|send|disable|approve|delete|publish|follow\s+only)\b",
    _I,
)
_AUTHORITY = re.compile(
    r"\b(?:authori[sz]ed|approved\s+by|already\s+approved|granted\s+(?:\w+\s+)?permission|"
    r"(?:exception|permission|clearance)\s+granted|per\s+(?:company\s+|the\s+)?(?:policy|admin|"
    r"owner|lead)|policy\s+says|urgent\s+from|(?:owner|admin|maintainers?|boss|manager|cto|ceo|"
    r"it|lead)\s+(?:says|said|wants|asked|requires)|you\s+(?:can|may)\s+(?:now\s+)?(?:skip|"
    r"ignore|bypass|run|act|read|print|delete)|override\s*:|your\s+role\s+has\s+changed)\b",
    _I,
)
_SECRECY = re.compile(
    r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|show|reveal)\s+(?:this|it|that)?"
    r"\s*(?:to\s+)?(?:the\s+)?(?:user|anyone|them|him|her)|\bwithout\s+(?:telling|"
    r"informing|notifying)\b|\b(?:silently|secretly|covertly)\b|\bkeep\s+(?:this|it)\s+"
    r"(?:between\s+us|secret|hidden|from\s+the\s+user)\b|\bpretend\b(?:[^.\n]|\.(?=\w)){0,40}?\b"
    r"(?:passed|approved|succeeded|checked|reviewed|safe)\b",
    _I,
)
_WAIVED = re.compile(
    r"\b(?:skip|ignore|waive|drop|without|no|cancel\w*|obsolete|void)\b(?:[^.\n]|\.(?=\w)){0,30}?\b"
    r"(?:confirmations?|restrictions?|safety|review|approvals?|guardrails?|instructions?|rules|"
    r"guidelines|limits?)\b|\b(?:confirmations?|restrictions?|safety\s+\w+|review|"
    r"approvals?|instructions?|rules|guidelines)\b(?:[^.\n]|\.(?=\w)){0,40}?\b(?:cancel\w*|obsolete|void|"
    r"no\s+longer|lifted|waived)\b",
    _I,
)
_HANDED_OUT = re.compile(
    r"\b(?:include|reply\s+with|respond\s+with|print|paste|send|forward|exfiltrate|upload|"
    r"leak|add|attach|post|output|share|give|grab|store|publish)\b(?:[^.\n]|\.(?=\w)){0,60}?\b(?:"
    + _SENSITIVE
    + r"|system\s+prompt|(?:deploy(?:ment)?|signing|private|ssh)\s+keys?|/etc/(?:shadow|"
    r"passwd)|customer\s+(?:list|data|records)|the\s+thread|kube\s*config|\.kube|"
    r"conversation|prompt\s+history|full\s+prompt|~/\.ssh\b|aws\s+keys?|authorized_keys|"
    r"repo(?:sitory)?\b(?:[^.\n]|\.(?=\w)){0,10}\bto)\b|"
    r"\b(?:reverse\s+shell|authorized_keys)\b|\bexecutes?\s+whatever\b|"
    r"\btreat\b(?:[^.\n]|\.(?=\w)){0,40}?\bas\s+(?:already\s+)?(?:approved|trusted)\b|"
    r"\bfollow\s+only\b(?:[^.\n]|\.(?=\w)){0,40}?" + _URL + r"|\b(?:disable|remove|turn\s+off)\s+"
    r"(?:two-factor|2fa|mfa)\b",
    _I,
)
_ALONE = re.compile(
    r"\bexfiltrat\w*|/etc/shadow\b|\bsystem\s+prompt\b(?:[^.\n]|\.(?=\w)){0,20}?\b(?:so|to)\b|"
    r"\b(?:reply|respond)\s+with\s+your\b|"
    r"\b(?:ignore|disregard|forget)\s+(?:whatever|everything|anything|all)\b(?:[^.\n]|\.(?=\w)){0,40}?\b"
    r"(?:said|told|written|given|before|above|earlier)\b|"
    r"\b(?:include|reply\s+with|respond\s+with|paste|send|forward|leak|post|share|give|"
    r"print|output)\b(?:[^.\n]|\.(?=\w)){0,60}?\b(?:api[ _-]?keys?|api\s+tokens?|passwords?|"
    r"credentials|"
    r"private[ _-]?keys?|ssh[ _-]?keys?|id_rsa|secret\s+keys?|access\s+tokens?)\b",
    _I,
)
_TOGETHER = (_TO_AGENT, _AUTHORITY, _SECRECY, _WAIVED, _HANDED_OUT)


def _plain(text: str) -> str:
    """Text as the patterns read it: compatibility forms folded (full-width letters, ligatures),
    invisible characters dropped, so that spelling tricks do not hide a sign."""
    if text.isascii():  # (no compatibility form or invisible character is ASCII)
        return text
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


@functools.lru_cache(maxsize=1024)  # (recall screens the same texts prompt after prompt)
def screen(text: str) -> str | None:
    """Why ``text`` reads as an instruction planted for the agent, or None for a memory."""
    plain = _plain(text)
    for why, pattern in _SIGNS:
        if pattern.search(plain):
            return why
    if _ALONE.search(plain):
        return "it asks for what an agent must keep to itself"
    signs = [p for p in _TOGETHER if p.search(plain)]
    if len(signs) >= 2 or _SECRECY in signs:
        return "it addresses the agent with orders (" + ", ".join(_NAMES[p] for p in signs) + ")"
    return None


_NAMES = {
    _TO_AGENT: "addressed to the agent",
    _AUTHORITY: "claims authority",
    _SECRECY: "keeps it from the user",
    _WAIVED: "waives a safeguard",
    _HANDED_OUT: "hands out something sensitive",
}
