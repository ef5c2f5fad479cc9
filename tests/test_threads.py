"""client_app/threads.py: what ``client-threads`` stands for outside a Ray actor."""

from __future__ import annotations

import os

import pytest
import torch

from client_app.threads import omp_threads, threads_for, use_threads


@pytest.mark.parametrize(("value", "expected"), [("1", 1), ("3", 3), ("2,1", 2), (" 4 ", 4), ("0", None), ("x", None)])
def test_omp_threads_reads_the_first_positive_count(monkeypatch: pytest.MonkeyPatch, value: str, expected) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert omp_threads() == expected


def test_zero_means_omp_num_threads_when_set_and_every_core_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads_for(0) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads_for(0) == (os.cpu_count() or 1)


def test_a_positive_setting_wins_over_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads_for(3) == 3


def test_use_threads_sets_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    try:
        assert use_threads(0) == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
