"""benchmarks/launch_timeline.py: milestones from Flower's log lines, in time order."""

from __future__ import annotations

from datetime import datetime, timezone

from benchmarks.launch_timeline import first_stamps, stamp_of, timeline


def at(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def test_stamp_of_reads_flowers_local_time_the_web_servers_utc_and_none_without_one() -> None:
    line = "\x1b[94mDEBUG 2026-11-23 08:34:42,736\x1b[0m:     Runtime.AcquireTask"
    assert stamp_of(line) == at("2026-11-23 08:34:42.736")
    utc = datetime(2026, 11, 23, 8, 34, 45, 459000, tzinfo=timezone.utc).timestamp()
    assert stamp_of("2026-11-23T08:34:45.459Z INFO [uvicorn.error] Finished server process") == utc
    assert stamp_of("Successfully started run 1671543189467990303") is None


def test_the_first_matching_line_of_the_right_log_counts() -> None:
    logs = {
        "stream": [
            "INFO 2026-11-23 08:34:18,962:      Starting Flower Simulation",
            "INFO 2026-11-23 08:34:19,000:      Starting Flower Simulation",
            "INFO 2026-11-23 08:34:33,815:      10 clients connected; partition sizes [592, 450]",
        ],
        "superlink": ["INFO 2026-11-23 08:34:20,000:      Starting Flower Simulation"],
    }
    assert first_stamps(logs) == {
        "simulation engine starts": at("2026-11-23 08:34:18.962"),
        "every client answered the identity query": at("2026-11-23 08:34:33.815"),
    }


def test_timeline_orders_milestones_and_gives_the_gaps() -> None:
    rows = timeline(100.0, 130.0, {"b": 120.0, "a": 101.5})
    assert rows[3:] == ["| a | 1.50 | 1.50 |", "| b | 20.00 | 18.50 |", "| launcher done | 30.00 | 10.00 |"]
