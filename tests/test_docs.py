"""The documentation: a README a newcomer finishes, and the reference as a site that builds
with every link resolved."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    """Under 250 lines; the first two code blocks install and run, and install and test (what
    .ci/run runs, word for word); every link into docs/ names a page that exists."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.DOTALL)
    assert "pip install" in blocks[0] and "memdir" in blocks[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert blocks[1] in ci
    for page in re.findall(r"\]\(docs/([\w.-]+\.md)", readme):
        assert (ROOT / "docs" / page).is_file(), page


def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs build --strict: a page left out of the navigation, a link to a page that does
    not exist or an unknown link fails the build."""
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "site" / "trust" / "index.html").is_file()
    assert "What memdir trusts" in (tmp_path / "site" / "trust" / "index.html").read_text()


@pytest.mark.slow
def test_the_readmes_pipx_line_puts_memdir_on_the_path(tmp_path: Path) -> None:
    """The README's pipx line, as written (pipx from this environment, a home of the test's
    own): `memdir` is a command in ~/.local/bin, and the hooks it installs run it."""
    import json

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = readme.split("**As a command on your PATH**", 1)[1]
    command = re.search(r"```bash\n(.*?)\n```", line, re.DOTALL)
    assert command is not None and command.group(1).startswith("pipx install")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMDIR_", "PIPX_"))},
        "HOME": str(home),
        "PATH": f"{home / '.local' / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
    }
    shell = command.group(1).replace("pipx ", f"{sys.executable} -m pipx ", 1)
    r = subprocess.run(["bash", "-c", shell], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    installed = home / ".local" / "bin" / "memdir"
    assert installed.is_file()
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    hook = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert "/pipx/venvs/memdir/bin/python" in hook  # pipx's own interpreter
    version = subprocess.run([str(installed), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "memdir" in version.stdout
