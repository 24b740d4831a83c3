"""The choices and defaults of ProcessProfile's string options, from their one
definition: the recorder's table (src/recorder/options.h), which enable()
validates against.

ProcessProfile (profiler.py), `threadgraph run`'s argparse options (_run.py:
choices, defaults, --help) and --follow-exec (_follow.py) take them from here.
tests/python/test_options.py checks that docs/api.md and docs/run.md name every
choice.
"""
from typing import Dict, Tuple

from threadgraph import _recorder

#: {option: (choice, ...)} for "profile", "memory", "backend", "format" and "mode".
CHOICES: Dict[str, Tuple[str, ...]] = {
    name: tuple(values) for name, values in _recorder.OPTION_CHOICES.items()}
#: {option: default choice}.  ProcessProfile's None defaults resolve to these
#: (format: "text" with a stream_factory; backend: $THREADGRAPH_BACKEND first).
DEFAULTS: Dict[str, str] = dict(_recorder.OPTION_DEFAULTS)

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
