"""experiments/provenance.py: the commit of the checkout a runner ran from, whether its code had uncommitted
changes (results and prose do not count), and how a cell's code.json reads in the tables."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from experiments.provenance import CODE_FILE, checkout_state, code_text, record_code


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True, capture_output=True
    )
    return done.stdout.decode().strip()


def checkout(tmp_path: Path) -> Path:
    """A git repository with a code file and a recorded result, both committed."""
    project = tmp_path / "project"
    (project / "measurements").mkdir(parents=True)
    (project / "method.py").write_text("x = 1\n")
    (project / "measurements" / "summary.md").write_text("old\n")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    return project


def test_a_clean_checkout_names_its_commit_and_results_written_since_do_not_count(tmp_path: Path) -> None:
    project = checkout(tmp_path)
    (project / "measurements" / "summary.md").write_text("rewritten by a runner\n")
    (project / "untracked_notes.txt").write_text("scratch\n")
    assert checkout_state(project) == {"commit": git(project, "rev-parse", "HEAD"), "uncommitted_changes": False}


def test_a_changed_code_file_is_an_uncommitted_change(tmp_path: Path) -> None:
    project = checkout(tmp_path)
    (project / "method.py").write_text("x = 2\n")
    state = checkout_state(project)
    assert state is not None and state["uncommitted_changes"] is True


def test_outside_a_git_checkout_nothing_is_recorded(tmp_path: Path) -> None:
    assert checkout_state(tmp_path) is None
    record_code(tmp_path, None)
    assert not (tmp_path / CODE_FILE).exists()


def test_a_cells_code_reads_as_the_short_commit_and_says_when_it_had_changes(tmp_path: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    record_code(tmp_path, {"commit": commit, "uncommitted_changes": False})
    assert json.loads((tmp_path / CODE_FILE).read_text()) == {"commit": commit, "uncommitted_changes": False}
    assert code_text({CODE_FILE: (tmp_path / CODE_FILE).read_bytes()}) == "0123456"
    dirty = json.dumps({"commit": commit, "uncommitted_changes": True}).encode()
    assert code_text({CODE_FILE: dirty}) == "0123456 with uncommitted changes"
    assert code_text({"summary.json": b"{}"}) is None
