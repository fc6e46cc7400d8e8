"""Relative times a client resolves before sending (docs/verbs.md, memory.search `since`/`until`).

`7d`, `2w`, `12h` count back from now; `today`, `yesterday` and a date (`2026-11-30`) are the start of that
day in the caller's local time zone. Every form is one instant, sent as an RFC 3339 UTC time, so
`--since yesterday --until today` is all of yesterday. Anything else is sent as given, for the daemon to
accept as an RFC 3339 time or refuse (docs/decisions.md D291).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

AGO = re.compile(r"^(\d{1,5})([hdw])$")
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
UNITS = {"h": "hours", "d": "days", "w": "weeks"}
FORMS = "7d, 2w, 12h, today, yesterday, YYYY-MM-DD or an RFC 3339 time"


def resolve(text: str, now: datetime | None = None) -> str:
    """The RFC 3339 UTC time of `text` in the local time zone of `now` (the clock's, by default)."""
    value = text.strip().lower()
    moment = (now or datetime.now(UTC)).astimezone()  # the caller's local time zone
    found = AGO.match(value)
    if found:
        return _utc(moment - timedelta(**{UNITS[found.group(2)]: int(found.group(1))}))
    if value in ("today", "yesterday"):
        day = moment.date() - timedelta(days=1 if value == "yesterday" else 0)
        return _utc(_start(day))
    if DAY.match(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return text
        return _utc(_start(day))
    return text


def _start(day: date) -> datetime:
    """Local midnight starting `day` (its offset may differ from now's across a daylight-saving change)."""
    return datetime.combine(day, time()).astimezone()


def _utc(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
