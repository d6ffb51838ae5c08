"""What a pending tool call writes, and which standing conventions it breaks."""

from __future__ import annotations

from memdir.integrations.toolcheck import findings, parsable, pending


def test_what_each_tool_carries() -> None:
    multi = pending("MultiEdit", {"file_path": "/p/a.py", "edits": [
        {"old_string": "x", "new_string": "def a():\n    pass"}, "junk",
        {"old_string": "y", "new_string": "def b():\n    pass"}]})  # fmt: skip
    assert multi.code == (("/p/a.py", "def a():\n    pass\n\ndef b():\n    pass"),)
    assert pending("Bash", {"command": ["npm", "install"]}).command == "npm install"
    assert pending("Read", {"file_path": "/p/a.py"}).code == ()
    assert pending("MultiEdit", {"file_path": "/p/a.py", "edits": "no"}).code == (("/p/a.py", ""),)


def test_a_fragment_is_read_by_its_definitions() -> None:
    fragment = "        @staticmethod\n        def helper(a, b):\n            return [\n"
    assert parsable(fragment) == "@staticmethod\ndef helper(a, b):\n    ..."


def test_only_broken_rules_are_found_and_only_in_python() -> None:
    rules = [
        ("method-decorator-timer", "Always add the '@timer' decorator to all methods"),
        ("function-docstrings", "Always use docstrings in functions"),
        ("chit-chat", "Team lunch is on Fridays"),
    ]
    code = "class A:\n    @timer\n    def m(self):\n        pass\n\ndef f():\n    return 1\n"
    found = findings(rules, pending("Write", {"file_path": "/p/a.py", "content": code}))
    assert [name for name, _, _ in found] == ["function-docstrings"]
    assert found[0][2] == ["a.py line 6: 'f' has no docstring"]
    assert findings(rules, pending("Write", {"file_path": "/p/a.md", "content": code})) == []
