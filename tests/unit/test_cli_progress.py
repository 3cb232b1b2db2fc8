"""samsa/cli/progress.py: a bar redrawn in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

import pytest

from samsa.cli.progress import Progress


def test_plain_lines_have_counts_and_no_carriage_returns() -> None:
    out = io.StringIO()
    p = Progress("copying", total=10, unit="partitions", stream=out, tty=False, interval=0)
    for i in range(1, 11):
        p.update(i)
    p.finish()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines[0].startswith("copying: 1/10 partitions  10%")
    assert lines[-1].startswith("copying: 10/10 partitions  100%")
    assert len(lines) == 11  # one per update, and the last state once more


def test_plain_mode_is_quiet_for_short_work() -> None:
    out = io.StringIO()
    p = Progress("x", total=5, stream=out, tty=False, interval=60)
    for i in range(5):
        p.update(i)
    p.finish()
    assert out.getvalue() == ""


def test_forced_steps_print_at_once() -> None:
    out = io.StringIO()
    p = Progress("", total=2, unit="partitions reassigned", stream=out, tty=False, interval=60)
    p.update(0, force=True)
    p.update(0)
    p.update(2, force=True)
    p.finish()
    assert out.getvalue().splitlines()[0].startswith("0/2 partitions reassigned")
    assert "2/2 partitions reassigned" in out.getvalue().splitlines()[-1]


def test_terminal_bar_redraws_in_place() -> None:
    out = io.StringIO()
    p = Progress("producing", total=4096, unit="bytes", stream=out, tty=True, interval=0)
    p.update(1024)
    p.update(4096)
    p.finish()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "[######" in text and "4.0 KiB/4.0 KiB" in text and "100%" in text


def test_no_total_counts_without_percent() -> None:
    out = io.StringIO()
    p = Progress("reading", unit="events", stream=out, tty=False, interval=0)
    p.update(1234)
    assert out.getvalue().startswith("reading: 1,234 events  0:00")
    assert "%" not in out.getvalue()


def test_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMSA_PROGRESS", "off")
    out = io.StringIO()
    p = Progress("x", total=3, stream=out, tty=True, interval=0)
    p.update(3)
    p.finish()
    assert out.getvalue() == ""


def test_interval_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMSA_PROGRESS_INTERVAL", "0")
    assert Progress("x", stream=io.StringIO(), tty=False).interval == 0
    monkeypatch.setenv("SAMSA_PROGRESS_INTERVAL", "junk")
    assert Progress("x", stream=io.StringIO(), tty=False).interval == 5.0
