"""The deployment guide's commands (docs/deployment.md) against the files they name: every ``deployment/…`` path
exists, every ``python -m deployment.<module>`` command's flags (and ``--run-config``) are accepted by that module's own
argument parsing, every ``deployment/*.sh`` command has as many arguments as the script's usage line allows, and the
run config of ``flwr run`` names only settings the app has. Nothing is started: the modules' work is replaced."""

from __future__ import annotations

import importlib
import itertools
import re
import shlex
from pathlib import Path

import pytest

from methods.registry import config_with_overrides

PROJECT = Path(__file__).resolve().parents[1]
DOC = (PROJECT / "docs" / "deployment.md").read_text()


def shell_commands() -> list[list[str]]:
    """The commands of the doc's ```bash blocks, continuation lines joined, comments dropped, split into words."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", DOC, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:  # `for ...; do CMD; done`, `A && B`: each command on its own
                if token not in (";", "&&", "||", "|"):
                    words.append(token)
                    continue
                while words and words[0] in ("do", "done", "then", "sudo"):
                    words = words[1:]
                if words:
                    commands.append(words)
                words = []
    return commands


COMMANDS = shell_commands()
MODULE_COMMANDS = [c for c in COMMANDS if c[:2] == ["python", "-m"] and c[2].startswith("deployment.")]
SCRIPT_COMMANDS = [c for c in COMMANDS if re.fullmatch(r"deployment/[\w.-]+\.sh", c[0])]
FLWR_RUNS = [c for c in COMMANDS if c[:2] == ["flwr", "run"]]


def test_the_doc_has_the_commands_this_test_checks():
    assert {c[2] for c in MODULE_COMMANDS} == {
        "deployment.credentials",
        "deployment.export_partitions",
        "deployment.federation_load",
    }
    assert {c[0] for c in SCRIPT_COMMANDS} == {
        "deployment/start-superlink.sh",
        "deployment/start-supernode.sh",
        "deployment/stop.sh",
    }
    assert FLWR_RUNS


@pytest.mark.parametrize("path", sorted(set(re.findall(r"(?<![\w/])deployment/[\w.-]*\w", DOC))))
def test_every_deployment_file_the_doc_names_exists(path):
    assert (PROJECT / path).exists(), f"docs/deployment.md names {path}, which is not in the project"


@pytest.mark.parametrize("command", MODULE_COMMANDS, ids=lambda c: " ".join(c[:3]))
def test_module_commands_are_accepted_by_their_parsers(command, monkeypatch, capsys, tmp_path):
    module = importlib.import_module(command[2])
    work = {
        "deployment.credentials": "write_credentials",
        "deployment.export_partitions": "export_partitions",
        "deployment.federation_load": "docs" if command[3:4] == ["docs"] else "measure",
    }
    calls = []
    monkeypatch.setattr(module, work[command[2]], lambda *args, **kwargs: calls.append(args) or [])
    if command[2] == "deployment.federation_load":  # a run per N, recorded into a file of this test's
        monkeypatch.setattr(module, "RESULTS", tmp_path / "load.json")
        monkeypatch.setattr(module, "docs", lambda *args, **kwargs: calls.append(args) or 0)
        cell = lambda *args, **kwargs: calls.append(args) or {"nodes": args[0], "rounds": 20, "runs": []}  # noqa: E731
        monkeypatch.setattr(module, "measure", cell)
    if command[2] == "deployment.export_partitions":
        monkeypatch.setattr(module, "federated_split", lambda config: config)
    try:
        code = module.main(command[3:])
    except SystemExit as exit_:  # argparse refused a flag or a value
        pytest.fail(f"{' '.join(command)}: refused ({exit_.code}): {capsys.readouterr().err}")
    expected = 1  # one call of the command's work; the load benchmark measures once per federation size
    if "--nodes" in command:
        expected = len(list(itertools.takewhile(str.isdigit, command[command.index("--nodes") + 1 :])))
    assert code == 0 and len(calls) == expected


def usage_arity(script: Path) -> tuple[int, int | None]:
    """(fewest, most) arguments of the script's usage line, ``#   deployment/x.sh [--flag] A B [C] [D ...]``."""
    usage = next(line for line in script.read_text().splitlines() if line.startswith(f"#   deployment/{script.name}"))
    words = [w for w in usage.split()[2:] if not w.startswith("[--")]
    repeated = any(w.endswith("...]") or w == "..." for w in words)
    words = [w for w in words if not w.startswith("...")]
    fewest = sum(not w.startswith("[") for w in words)
    return fewest, None if repeated else len(words)


@pytest.mark.parametrize("command", SCRIPT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_script_commands_match_the_scripts_usage(command):
    script = PROJECT / command[0]
    assert script.exists() and script.stat().st_mode & 0o111, f"{command[0]} is missing or not executable"
    args = [a for a in command[1:] if a != "--insecure"]
    fewest, most = usage_arity(script)
    assert len(args) >= fewest and (most is None or len(args) <= most), (
        f"{' '.join(command)}: {len(args)} arguments, the script takes {fewest} to {most}"
    )


@pytest.mark.parametrize("command", FLWR_RUNS, ids=lambda c: " ".join(c[:4]))
def test_flwr_run_configs_name_known_settings(command):
    config = command[command.index("--run-config") + 1]
    config_with_overrides(config)  # raises ConfigError naming an unknown key or a refused value
