"""The systemd units in deployment/: valid for systemd, restarted and started at boot, and their command lines,
filled in from the example settings files, accepted by the pinned Flower."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from flwr.common.config import parse_config_args
from flwr.superlink.cli.flower_superlink import _parse_args_run_superlink
from flwr.supernode.cli.flower_supernode import _parse_args_run_supernode

from deployment.gated_superlink import startup_problem

DEPLOYMENT = Path(__file__).resolve().parents[1] / "deployment"
UNITS = {"fedft-supernode.service": "fedft-supernode.env", "fedft-superlink.service": "fedft-superlink.env"}
VENV_BIN = "/opt/fedft/venv/bin"


def unit_entries(text: str) -> dict[str, dict[str, list[str]]]:
    """Section → key → values of a unit file, with backslash-continued lines joined and comments dropped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, value = line.split("=", 1)
            current.setdefault(key.strip(), []).append(" ".join(value.split()))
    return sections


def env_file(text: str) -> dict[str, str]:
    """KEY=value lines of an EnvironmentFile (comments and blank lines skipped)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def expand(command: str, env: dict[str, str]) -> list[str]:
    """systemd's ExecStart expansion: ``${X}`` is one word, ``$X`` is split on whitespace (none when empty)."""
    words: list[str] = []
    for word in command.split():
        if match := re.fullmatch(r"\$\{(\w+)\}", word):
            words.append(env[match[1]])
        elif match := re.fullmatch(r"\$(\w+)", word):
            words.extend(env[match[1]].split())
        else:
            words.append(word)
    return words


def unit_and_settings(name: str) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    return unit_entries((DEPLOYMENT / name).read_text()), env_file((DEPLOYMENT / UNITS[name]).read_text())


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("name", UNITS)
def test_systemd_analyze_verify_accepts_the_unit(name: str, tmp_path: Path) -> None:
    # verify also checks that ExecStart's program exists: point it at this environment's instead of /opt/fedft.
    text = (DEPLOYMENT / name).read_text().replace(VENV_BIN, str(Path(sys.executable).parent))
    (tmp_path / name).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / name)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert name not in result.stderr, result.stderr  # warnings (unknown keys, bad values) exit 0 too


@pytest.mark.parametrize("name", UNITS)
def test_unit_restarts_starts_at_boot_and_reads_its_settings_file(name: str) -> None:
    unit, _ = unit_and_settings(name)
    service = unit["Service"]
    assert service["Restart"][0] in ("always", "on-failure") and int(service["RestartSec"][0]) > 0
    assert unit["Unit"]["StartLimitIntervalSec"] == ["0"]  # never stops restarting
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert "network-online.target" in unit["Unit"]["After"]
    assert service["EnvironmentFile"] == [f"/etc/fedft/{UNITS[name].removeprefix('fedft-')}"]
    assert service["User"] == ["fedft"] and service["KillMode"] == ["control-group"]
    assert service["ExecStart"][0].startswith(VENV_BIN + "/")


@pytest.mark.parametrize("name", UNITS)
def test_settings_file_defines_every_variable_the_command_uses(name: str) -> None:
    unit, settings = unit_and_settings(name)
    used = set(re.findall(r"\$\{?(\w+)\}?", unit["Service"]["ExecStart"][0]))
    assert used and used <= set(settings), used - set(settings)


def test_supernode_command_is_accepted_by_flower_and_keeps_its_clientapp_port_on_loopback() -> None:
    unit, settings = unit_and_settings("fedft-supernode.service")
    argv = expand(unit["Service"]["ExecStart"][0], settings)
    assert argv[0] == f"{VENV_BIN}/flower-supernode"
    args = _parse_args_run_supernode().parse_args(argv[1:])
    assert args.superlink == settings["SUPERLINK"] and args.node_config == settings["NODE_CONFIG"]
    assert args.auth_supernode_private_key == settings["NODE_KEY"] and not args.insecure
    assert args.host == "127.0.0.1"


def test_superlink_command_is_accepted_by_flower_and_by_the_gate() -> None:
    unit, settings = unit_and_settings("fedft-superlink.service")
    argv = expand(unit["Service"]["ExecStart"][0], settings)
    assert argv[:3] == [f"{VENV_BIN}/python", "-m", "deployment.gated_superlink"]
    args = _parse_args_run_superlink().parse_args(argv[3:])
    assert args.enable_supernode_auth and not args.insecure and args.ssl_keyfile == settings["SERVER_KEY"]
    assert args.host == "0.0.0.0" and args.port == int(settings["PORT"])
    assert startup_problem(argv[3:], {}) is None


def test_example_node_config_file_is_read_by_flower() -> None:
    node_config = parse_config_args([str(DEPLOYMENT / "fedft-node.toml")])
    assert node_config == {
        "partition-id": 3,
        "num-partitions": 10,
        "data-path": "/var/lib/fedft/data/node-3",
        "device": "auto",
    }
