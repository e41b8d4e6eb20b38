"""Times as OpenSSH's allowed-signers file writes them (`valid-after`, `valid-before`): read as
misc.c `parse_absolute_time` reads them, and written in the one form every reader takes the
same way, UTC with its `Z`."""

from __future__ import annotations

import calendar
import time
from datetime import UTC, datetime


def absolute_time(value: bytes) -> int:
    """misc.c `parse_absolute_time`: seconds since the epoch for `YYYYMMDD[HHMM[SS]]`, UTC with
    a `Z` or `UTC` suffix, local time without; 0 for what OpenSSH refuses (and for anything
    but digits, which this reader refuses though glibc's strptime may not: it then trusts
    less)."""
    utc = False
    if len(value) > 1 and value[-1:].upper() == b"Z":
        utc, value = True, value[:-1]
    elif len(value) > 3 and value[-3:].upper() == b"UTC":
        utc, value = True, value[:-3]
    if len(value) not in (8, 12, 14) or not value.isdigit():
        return 0
    digits = value.decode().ljust(14, "0")
    year, month, day = int(digits[:4]), int(digits[4:6]), int(digits[6:8])
    hour, minute, second = int(digits[8:10]), int(digits[10:12]), int(digits[12:14])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 61):
        return 0
    fields = (year, month, day, hour, minute, second, 0, 0, -1)
    try:
        moment = calendar.timegm(fields) if utc else int(time.mktime(fields))
    except (OverflowError, ValueError):
        return 0
    return max(moment, 0)


def openssh_time(moment: int) -> str:
    """`moment` (seconds since the epoch) as the UTC time OpenSSH reads: `YYYYMMDDHHMMSSZ`."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y%m%d%H%M%SZ")


def read_utc_time(text: str) -> int:
    """Seconds since the epoch for an OpenSSH UTC time (`YYYYMMDD[HHMM[SS]]Z`); ValueError for
    anything else: a time without its `Z` is local to the machine that reads it, and would
    mean another instant to the next maintainer's OpenSSH."""
    moment = absolute_time(text.encode()) if text.upper().endswith("Z") else 0
    if not moment:
        raise ValueError(f"{text!r} is not a UTC time YYYYMMDD[HHMM[SS]]Z")
    return moment
