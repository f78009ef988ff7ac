"""Off-peak windows (policy.off_peak): peak hours follow the planning time in the windows' time zone."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from placement_models import OffPeak, PlacementRequest
from pydantic import ValidationError

from placement import plan

NIGHTS = {"timezone": "Europe/Berlin", "windows": [{"start": "22:00", "end": "06:00", "days": ["mon", "tue", "wed",
                                                                                              "thu", "fri"]}]}


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.mark.parametrize(("utc", "off"), [
    ("2026-12-01T21:30:00", True),   # Tuesday 22:30 in Berlin (UTC+1 in winter): the night window
    ("2026-12-02T04:59:00", True),   # Wednesday 05:59: still Tuesday's night
    ("2026-12-02T05:00:00", False),  # Wednesday 06:00: the window has ended
    ("2026-12-02T12:00:00", False),  # midday
    ("2026-12-05T22:00:00", False),  # Saturday 23:00: no window starts on Saturdays
    ("2026-12-07T04:00:00", False),  # Monday 05:00: Sunday's night is not listed either
    ("2026-07-01T20:30:00", True),   # Wednesday 22:30 in summer (UTC+2)
])
def test_windows_wrap_midnight_follow_days_and_the_zone(utc: str, off: bool) -> None:
    assert OffPeak.model_validate(NIGHTS).contains(_at(utc)) is off


def _request(now: str) -> dict[str, Any]:
    def job(name: str, deferrable: bool) -> dict[str, Any]:
        return {"name": name, "deferrable": deferrable, "tasks": [{"name": "w", "gpus": 8}]}

    return {"cluster": {"nodes": [{"name": "a", "gpus": 8, "cpu": 64, "memory_gib": 512,
                                   "gpu_model": "H100-SXM5-80GB"}]},
            "jobs": [job("online", False), job("offline", True)],
            "policy": {"now": now, "off_peak": NIGHTS, "deterministic": True, "time_limit_s": 2}}


def test_a_deferrable_job_waits_in_peak_hours_and_goes_first_off_peak() -> None:
    assert {a.job for a in plan(_request("2026-12-02T12:00:00Z")).assignments} == {"online"}
    assert {a.job for a in plan(_request("2026-12-01T23:00:00Z")).assignments} == {"offline"}
    assert PlacementRequest.model_validate(_request("2026-12-01T23:00:00Z")).in_peak is False


def test_bad_windows_are_named() -> None:
    bad = _request("2026-12-02T12:00:00Z")
    bad["policy"]["off_peak"] = {"timezone": "Mars/Olympus", "windows": [{"start": "25:00", "end": "06:00"}]}
    with pytest.raises(ValidationError) as err:
        PlacementRequest.model_validate(bad)
    text = str(err.value)
    assert "policy.off_peak.timezone" in text and "Mars/Olympus" in text
    assert "policy.off_peak.windows.0.start" in text


def test_peak_and_off_peak_together_are_refused() -> None:
    both = _request("2026-12-02T12:00:00Z")
    both["policy"]["peak"] = True
    with pytest.raises(ValidationError, match="set either peak or off_peak"):
        PlacementRequest.model_validate(both)
