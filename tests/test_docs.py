"""The documentation: a README a newcomer finishes, and the reference as a site that builds
with every link resolved."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
