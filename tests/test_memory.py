"""The file format: lossless round trips, liberal reading, strict naming."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir import memory as memfmt
from memdir.errors import InvalidMemory, InvalidName
from memdir.memory import Memory

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("fname", ["user-language-preference.md", "prefer-pytest.md"])
def test_golden_files_round_trip_byte_for_byte(fname: str) -> None:
    """A canonical file parses and renders back to exactly the same bytes."""
    text = (GOLDEN / fname).read_text(encoding="utf-8")
    assert memfmt.dumps(memfmt.loads(text)) == text


def test_chinese_memory_fields() -> None:
    """The design's example memory parses to the expected fields."""
    m = memfmt.loads((GOLDEN / "user-language-preference.md").read_text(encoding="utf-8"))
    assert (m.name, m.type, m.description, m.body) == (
        "user-language-preference",
        "user_preference",
        "用户偏好用中文交流和回复",
        "用户希望所有回复使用简体中文。",
    )
    assert m.created == "2026-11-30T10:00:00Z"  # timestamps stay strings, not datetimes


def test_unknown_keys_are_kept_in_order() -> None:
    """Keys a person adds (tags, pinned) survive a rewrite."""
    m = memfmt.loads((GOLDEN / "prefer-pytest.md").read_text(encoding="utf-8"))
    assert list(m.extra) == ["tags", "pinned"] and m.pinned
    again = memfmt.loads(memfmt.dumps(m.replace(body="changed")))
    assert again.extra == {"tags": ["testing", "python"], "pinned": True}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no frontmatter here\n", "no YAML frontmatter"),
        ("---\nname: a\n", "not closed"),
        ("---\nname: [a\n---\nbody\n", "bad YAML"),
        ("---\n- a\n- b\n---\n", "not a mapping"),
        ("---\nname: a\ntype: t\n---\n", "missing required field 'description'"),
        ("---\nname: ../etc\ntype: t\ndescription: d\n---\n", "invalid memory name"),
        ("---\nname: a\ntype: t\ndescription: {x: 1}\n---\n", "must be text"),
        ("---\nname: a\x00\n---\n", "binary"),
    ],
)
def test_malformed_files_raise_with_reason(text: str, reason: str) -> None:
    """Each kind of malformed file is rejected with a reason a person can act on."""
    with pytest.raises(InvalidMemory, match=reason):
        memfmt.loads(text)


def test_liberal_reading_of_hand_written_files() -> None:
    """CRLF, a BOM, and an unknown type still parse; the bent rules become warnings."""
    text = "\ufeff---\r\nname: x\r\ntype: idea\r\ndescription: " + "d" * 300 + "\r\n---\r\nbody\r\n"
    m = memfmt.loads(text)
    assert m.body == "body"
    warnings = memfmt.check(m, ("user_preference",))
    assert any("unknown type" in w for w in warnings)
    assert any("longer than" in w for w in warnings)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a/b",
        "a\\b",
        "..",
        "../x",
        ".hidden",
        "MEMORY",
        "memory",
        "con",
        "NUL",
        "a b",
        "-lead",
        "a" * 101,
        "名" * 80,
        "x\ny",
        "a:b",
        "a*b",
    ],
)
def test_hostile_names_are_refused(name: str) -> None:
    """Path tricks, reserved names, odd characters and over-long names are refused."""
    with pytest.raises(InvalidName):
        memfmt.validate_name(name)


@pytest.mark.parametrize("name", ["prefer-pytest", "用户语言偏好", "ユーザー設定", "café_2", "x"])
def test_unicode_names_are_allowed(name: str) -> None:
    """Letters of any script, digits, '-' and '_' make a valid name and a safe file name."""
    assert memfmt.filename_for(name) == memfmt.validate_name(name) + ".md"


def test_names_are_nfc_normalised() -> None:
    """The same name typed in decomposed form maps to the same file."""
    assert memfmt.validate_name("cafe\u0301") == "caf\u00e9"


def test_validate_new_is_strict() -> None:
    """What memdir writes must follow every rule."""
    base = Memory("n", "user_preference", "one line")
    types = ("user_preference",)
    assert memfmt.validate_new(base, types) == base
    for bad in (
        base.replace(type="idea"),
        base.replace(description=" "),
        base.replace(description="a\nb"),
        base.replace(description="x" * 201),
    ):
        with pytest.raises(InvalidMemory):
            memfmt.validate_new(bad, types)


text_st = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=60)


@given(
    desc=text_st.filter(lambda s: s.strip() == s and s),
    body=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"), max_size=200
    ),
    tags=st.lists(text_st, max_size=3),
)
def test_any_memory_round_trips(desc: str, body: str, tags: list[str]) -> None:
    """loads(dumps(m)) == m for arbitrary descriptions, bodies and extra keys."""
    m = Memory("n", "t", desc, body, "2026-01-01T00:00:00Z", None, {"tags": tags})
    assert memfmt.loads(memfmt.dumps(m)) == m


def test_frontmatter_read_without_yaml_is_what_yaml_reads() -> None:
    """The fast reading of plain ``key: value`` frontmatter gives exactly YAML's mapping
    (strings, booleans, memdir's times) and leaves every other form to YAML itself."""
    import random

    import yaml

    from memdir.frontmatter import _plain, _yaml, parse_frontmatter

    loader, _ = _yaml()
    pieces = ["a", "Z", "é", "日", "1", "0", "2026-01-01T00:00:00Z", " ", ":", ": ", " #", "#",
              "'", '"', "-", "- ", "?", "{", "}", "[", "]", ",", "&", "*", "!", "|", ">", "%",
              "@", "`", "\t", "\u2028", "\x85", "\xa0", "yes", "No", "null", "~", "on", "OFF",
              ".", "_", "/", "(", "\\", "=", "<<", "0x1", "1e3", "True", "\ufeff", ".inf",
              "x:y"]  # fmt: skip
    rng = random.Random(7)
    fast = 0
    for _ in range(40_000):
        lines = []
        for _ in range(rng.randint(1, 4)):
            key = rng.choice(["name", "type", "description", "x_y", "pinned", "yes", "k-1"])
            value = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))
            lines.append(f"{key}: {value}")
        head = "\n".join(lines) + "\n"
        plain = _plain(head[:-1])
        if plain is None:
            continue
        fast += 1
        read = yaml.load(head, Loader=loader)
        assert read == plain and [type(v) for v in read.values()] == [
            type(v) for v in plain.values()
        ], head
        assert parse_frontmatter(head) == read
    assert fast > 500  # the fast reading was exercised, not only the fallback
    # what it must leave to YAML: numbers, nulls, quotes, comments, lists, a second line
    for head in ("a: 1\n", "a: null\n", "a: 'q'\n", "a: x # c\n", "a: [1]\n", "a:\n  b\n"):
        assert _plain(head[:-1]) is None
    assert parse_frontmatter("pinned: true\nname: x\n") == {"pinned": True, "name": "x"}


def test_plain_values_are_written_as_yaml_writes_them() -> None:
    """Values written without YAML come out byte for byte as YAML's own dump of them, so a
    canonical file is the same whichever way it was written."""
    import random

    import yaml

    from memdir.frontmatter import _yaml, dump_pair

    dumper = _yaml()[1]
    pieces = ["a", "Z", "é", "日", "1", "2026-01-01T00:00:00Z", " ", ":", ": ", " #", "#", "'",
              '"', "- ", "?", "{", "[", ",", "&", "*", "!", "|", ">", "%", "@", "`", "\t",
              "\u2028", "\x85", "\xa0", "yes", "No", "null", "~", ".", "_", "\\", "<<", "1e3",
              "\ufeff", "\U0001f600", "ß"]  # fmt: skip
    rng = random.Random(3)
    for _ in range(20_000):
        key = rng.choice(["name", "type", "description", "k-1"])
        value = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        expected = yaml.dump(
            {key: value},
            Dumper=dumper,
            allow_unicode=True,
            sort_keys=False,
            width=1 << 30,
            default_flow_style=False,
        )
        assert dump_pair(key, value) == expected, value


def test_git_conflict_markers_read_as_our_side_marked_conflicted() -> None:
    """A file git left its conflict markers in (the diff3 style's base too) reads as HEAD's
    side, marked conflicted with the git blob id of the other side; a lone '=======' (a
    Markdown heading's underline) or a block never closed is plain text."""
    from memdir.memory import CONFLICT_KEY, check, git_sides

    text = (
        "---\nname: indent\ntype: feedback\n<<<<<<< HEAD\ndescription: Two spaces\n"
        "||||||| base\ndescription: Four spaces\n=======\ndescription: Tabs\n>>>>>>> abc123\n"
        "---\nIndent Python.\n<<<<<<< HEAD\nUse 2 spaces.\n=======\nUse tabs.\n>>>>>>> abc\n"
    )
    ours, theirs = git_sides(text) or ("", "")
    assert "Two spaces" in ours and "2 spaces" in ours and "Tabs" not in ours
    assert "description: Tabs\n---\nIndent Python.\nUse tabs.\n" in theirs
    assert "Four spaces" not in ours + theirs
    mem = memfmt.loads(text)
    assert mem.description == "Two spaces" and mem.body == "Indent Python.\nUse 2 spaces."
    data = theirs.encode()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert mem.extra[CONFLICT_KEY] == {"other": blob, "fields": ["description", "body"],
                                       "by": "git"}  # fmt: skip
    assert check(mem, ("feedback",))[0].startswith("conflicted: git left conflict markers")
    heading = "---\nname: a\ntype: feedback\ndescription: d\n---\nTitle\n=======\nText.\n"
    assert git_sides(heading) is None and CONFLICT_KEY not in memfmt.loads(heading).extra
    unclosed = heading.replace("Title", "<<<<<<< HEAD\nTitle")
    assert git_sides(unclosed) is None and "<<<<<<< HEAD" in memfmt.loads(unclosed).body
    example = heading.replace("Title\n", "```\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n```\n")
    assert git_sides(example) is None and "=======\nb\n" in memfmt.loads(example).body
