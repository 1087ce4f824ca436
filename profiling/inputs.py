"""Number and unit helpers shared by the ncu parsers.

    >>> parse_number("1,234.5")
    1234.5
    >>> parse_number("n/a") is None
    True
    >>> parse_number("4,257.42 (0; 0; 12.5)")   # a metric with instances: its aggregate
    4257.42
    >>> unit_factor("usecond"), unit_factor("Kbyte"), unit_factor("Gbyte/s"), unit_factor("%")
    (1000.0, 1000.0, 1000000000.0, 1.0)

Base units after scaling: nanoseconds, bytes, per second, Hz; percent stays 0-100.
"""

from __future__ import annotations

import math
import re

_MISSING = {"", "n/a", "na", "nan", "-nan", "no data", "none", "null", "-", "--", "inf", "-inf", "(not available)"}
_NUM = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][-+]?\d+)?$")

_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "ki": 1024.0, "mi": 1024.0**2, "gi": 1024.0**3, "ti": 1024.0**4}
_TIME_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "µs": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9, "sec": 1e9}
_TIME_S = {k: v / 1e9 for k, v in _TIME_NS.items()}
_BYTE = re.compile(r"^(k|m|g|t|p|ki|mi|gi|ti)?(byte|b)$", re.I)
_HZ = re.compile(r"^(k|m|g|t)?hz$", re.I)


def parse_number(text: object) -> float | None:
    """A finite float from an ncu cell ("65,536", "92.51", "45%", "1.2e+04"), else None."""
    if text is None:
        return None
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        try:
            v = float(text)
        except OverflowError:  # an integer of hundreds of digits
            return None
        return v if math.isfinite(v) else None
    s = str(text).strip().strip('"').strip()
    if s.endswith(")") and " (" in s:  # --print-metric-instances values: "265 (265)", "49.36 (0; 0; ...)": the aggregate
        s = s[: s.index(" (")].strip()
    if s.lower() in _MISSING or len(s) > 64:
        return None
    s = s.rstrip("%").strip()
    if not s or not _NUM.match(s) or not any(c.isdigit() for c in s):
        return None
    try:
        v = float(s.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _simple_factor(u: str) -> float | None:
    if not u:
        return 1.0
    low = u.lower()
    if low in _TIME_NS:
        return _TIME_NS[low]
    m = _BYTE.match(u)
    if m:
        return _SI[(m.group(1) or "").lower()]
    m = _HZ.match(u)
    if m:
        return _SI[(m.group(1) or "").lower()]
    return None


def unit_factor(unit: str | None) -> float:
    """Multiplier that turns a value in ``unit`` into kwiki's base unit (1.0 when unknown)."""
    if not unit:
        return 1.0
    u = str(unit).strip()
    if not u or u == "%" or len(u) > 40:
        return 1.0
    if "/" in u:
        num, _, den = u.partition("/")
        nf = _simple_factor(num.strip())
        if nf is None:
            nf = 1.0
        d = den.strip().lower()
        if d in _TIME_S:  # per time unit -> per second
            return nf / _TIME_S[d]
        return nf
    f = _simple_factor(u)
    return 1.0 if f is None else f
