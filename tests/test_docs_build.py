"""The documentation site's strict build passes on the tree and fails on a broken link (``make test``'s only docs
build). ``make docs`` is run in a copy of the project (the files git tracks or would track): it passes on the copy as
it is, and fails on the same copy with a link to a missing page and a link to a missing anchor planted in one page,
naming both. A build that passes whatever the links (``mkdocs build --strict --quiet``: MkDocs then drops the
warnings before ``--strict`` counts them) fails this test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
#: The running environment's scripts folder (mkdocs), given to the Makefile as its BIN.
BIN = Path(sys.executable).parent
PLANTED = ("no-such-page.md", "running.md#no-such-anchor")


def project_copy(target: Path) -> None:
    """The project's files as a fresh clone of this working tree would have them (tracked, plus untracked files
    that are not ignored), without builds, caches or virtual environments."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = PROJECT / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def make_docs(project: Path) -> subprocess.CompletedProcess[str]:
    """``make docs`` in ``project`` with this environment's mkdocs, its setup taken as done (the stamp file named
    and marked old, so make never installs); the output of both streams together. The make that runs the tests
    (``make test``) leaves its own flags in the environment; the inner make gets none of them."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    stamp = "set-up-by-the-test"
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(project), f"--old-file={stamp}", "docs", f"STAMP={stamp}",
         f"BIN={BIN}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment, timeout=300,
    )  # fmt: skip


def test_the_strict_docs_build_fails_on_a_planted_broken_link(tmp_path: Path) -> None:
    assert (BIN / "mkdocs").is_file(), f"no mkdocs beside {sys.executable}: install the dev extra"
    project = tmp_path / "project"
    project_copy(project)

    as_it_is = make_docs(project)
    assert as_it_is.returncode == 0, as_it_is.stdout[-3000:]
    assert (project / ".site" / "development" / "index.html").is_file()

    page = project / "docs" / "development.md"
    missing_page, missing_anchor = PLANTED
    page.write_text(f"{page.read_text()}\n[A page]({missing_page}) and [an anchor]({missing_anchor}).\n")
    planted = make_docs(project)
    assert planted.returncode != 0, planted.stdout[-3000:]
    assert all(f"'{link}'" in planted.stdout for link in PLANTED), planted.stdout[-3000:]
