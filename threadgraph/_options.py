"""The choices and defaults of ProcessProfile's string options, from their one
definition: the recorder's table (src/recorder/options.h), which enable()
validates against.

ProcessProfile (profiler.py), `threadgraph run`'s argparse options (_run.py:
choices, defaults, --help) and --follow-exec (_follow.py) take them from here.
tests/python/test_options.py checks that docs/api.md and docs/run.md name every
choice.
"""
import re
from typing import Dict, Optional, Tuple, Union

from threadgraph import _recorder

#: {option: (choice, ...)} for "profile", "memory", "backend", "format", "mode" and
#: "time_resolution".
CHOICES: Dict[str, Tuple[str, ...]] = {
    name: tuple(values) for name, values in _recorder.OPTION_CHOICES.items()}
#: {option: default choice}.  ProcessProfile's None defaults resolve to these
#: (format: "text" with a stream_factory; backend: $THREADGRAPH_BACKEND first).
DEFAULTS: Dict[str, str] = dict(_recorder.OPTION_DEFAULTS)

#: {keyword: default} of enable()'s numeric and boolean keywords (track_memory,
#: track_stack, track_sleeps, timestamps, sample_every, accounting, compress,
#: native): src/recorder/options.h's TG_DEFAULT_*.
VALUE_DEFAULTS: Dict[str, Union[bool, int]] = dict(_recorder.VALUE_DEFAULTS)

PROFILE_MODES = CHOICES["profile"]
MEMORY_MODES = CHOICES["memory"]
BACKENDS = CHOICES["backend"]
FORMATS = CHOICES["format"]
MODES = CHOICES["mode"]
#: mode="sampled": mean bytes between two sampled stacks unless sample_bytes says.
SAMPLED_DEFAULT_BYTES: int = _recorder.SAMPLED_DEFAULT_BYTES


def describe(option: str) -> str:
    """OPTION's choices as text: "'a', 'b' or 'c'"."""
    quoted = ["'%s'" % c for c in CHOICES[option]]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]


def check(option: str, value: object) -> str:
    """VALUE if it is one of OPTION's choices, else ValueError (the recorder's
    own message)."""
    if value not in CHOICES[option]:
        raise ValueError("%s must be %s, not %r" % (option, describe(option), value))
    return value  # type: ignore[return-value]


#: The range of max_size (bytes): at least the recorder's smallest
#: (src/recorder/capture_write.h), at most what enable() takes (a long long).
MAX_SIZE_MIN: int = _recorder.MAX_SIZE_MIN
MAX_SIZE_MAX: int = _recorder.MAX_SIZE_MAX
#: The largest sample_bytes (src/recorder/accounting.h, TG_ACCT_SAMPLE_MAX).
SAMPLE_BYTES_MAX: int = _recorder.SAMPLE_BYTES_MAX
#: The largest process.mem frequency, setProcessMemoryFrequence (a C long).
SAMPLE_EVERY_MAX: int = _recorder.SAMPLE_EVERY_MAX
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*\Z", re.IGNORECASE)


def check_range(option: str, value: object, low: int, high: int) -> int:
    """int(VALUE) if it is from LOW to HIGH, else ValueError naming OPTION and
    the range: the recorder takes C integers, and a value past them must fail
    here, before a run directory is made."""
    try:
        if isinstance(value, bool):
            raise TypeError  # True is not a count: sample_bytes=True is not "on"
        number = int(value)  # type: ignore[call-overload]
        # int() truncates: 0.5 would silently be 0 (off), 1.5 would be 1
        if not isinstance(value, (int, str)) and number != value:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ValueError("%s must be a whole number from %d to %d, not %r"
                         % (option, low, high, value)) from None
    if not low <= number <= high:
        raise ValueError("%s must be from %d to %d, not %d" % (option, low, high, number))
    return number


def parse_size(value: Union[None, int, str]) -> Optional[int]:
    """A size limit in bytes from an int or a text such as "10M", "2G", "512K",
    "1.5G" or "1048576" (K, M, G, T are powers of 1024; a B or iB may follow);
    None or 0 means no limit (None).  ValueError for anything else, or for a
    limit below MAX_SIZE_MIN or above MAX_SIZE_MAX."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("max_size must be a size such as '10M' or a number of bytes, "
                         "not %r" % (value,))
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE_RE.match(str(value))
        if not m:
            raise ValueError("max_size must be a size such as '10M', '2G' or a number "
                             "of bytes, not %r" % (value,))
        # exact, in integers (a float turns a long number into inf, or rounds
        # it; fractions would cost every profiled program its import)
        whole, _, frac = m.group(1).partition(".")
        unit = _SIZE_UNITS[m.group(2).upper()]
        size = int(whole) * unit + int(frac or "0") * unit // 10 ** len(frac)
    if size == 0:
        return None
    if size < MAX_SIZE_MIN:
        raise ValueError("max_size must be at least %dK (a segment's head repeats the "
                         "run's definitions), not %r" % (MAX_SIZE_MIN >> 10, value))
    if size > MAX_SIZE_MAX:
        raise ValueError("max_size must be at most %d bytes, not %r"
                         % (MAX_SIZE_MAX, value))
    return size
