"""The shapes of an extraction reply: the JSON schema an endpoint may enforce, and the
validators that read what a model answered (memory items, or plain facts from a small model)
into items. This module does NOT plan or write memories (``extract`` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..gate.safetext import one_line
from ..notes import sounds_like_preference

if TYPE_CHECKING:
    from ..providers import JSONSchema


def extract_schema(types: tuple[str, ...], scoped: bool = False) -> JSONSchema:
    """The extraction reply's shape, for endpoints that enforce a JSON schema."""
    item: JSONSchema = {
        "type": "object",
        "required": ["action", "name", "type", "description", "body"],
        "properties": {
            "action": {"type": "string", "enum": ["create", "update"]},
            "name": {"type": "string"},
            "type": {"type": "string", "enum": list(types)},
            "description": {"type": "string"},
            "body": {"type": "string"},
        },
    }
    if scoped:
        item["required"].append("scope")
        item["properties"]["scope"] = {"type": "string", "enum": ["user", "project"]}
    return {
        "type": "object",
        "required": ["memories"],
        "properties": {"memories": {"type": "array", "items": item}},
    }


FACTS_SCHEMA: JSONSchema = {
    "type": "object",
    "required": ["facts"],
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
}


def validate_facts(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = value.get("facts", value.get("memories"))
    if not isinstance(value, list):
        raise ValueError('expected {"facts": ["...", ...]}')
    out = []
    for f in value:
        text = str(f.get("body") or f.get("description") or "") if isinstance(f, dict) else str(f)
        if text.strip():
            out.append(one_line(text))
    return out


def fact_item(fact: str, types: tuple[str, ...]) -> dict[str, Any]:
    """A memory item from one fact: a preference or correction, or a fact."""
    kind = "user_preference" if sounds_like_preference(fact) else "project_fact"
    if kind not in types:
        kind = types[0]
    return {"action": "create", "name": "", "type": kind, "description": fact, "body": fact}


def validate_items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        items = value.get("memories")
        if isinstance(items, list):
            return items
        if "action" in value or "name" in value:
            return [value]
    raise ValueError('expected {"memories": [...]}')
