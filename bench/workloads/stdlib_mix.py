"""A realistic stdlib mix: json, re and string formatting."""

import json
import re

DESCRIPTION = "json dumps/loads, regex search/sub, str.format and f-strings"

_LOG_RE = re.compile(r"(?P<ip>\d+\.\d+\.\d+\.\d+) - (?P<user>\w+) \[(?P<ts>[^\]]+)\] \"(?P<req>[^\"]*)\" (?P<code>\d{3})")


def _lines(n):
    for i in range(n):
        yield '10.0.%d.%d - user%d [21/Nov/2026:23:%02d:%02d] "GET /api/items/%d HTTP/1.1" %d' % (
            i % 256, i % 100, i % 37, i % 60, i % 60, i, 200 if i % 7 else 404)


def run(scale=1.0):
    n = int(80000 * scale) or 1
    records = []
    for line in _lines(n):
        m = _LOG_RE.match(line)
        if m:
            d = m.groupdict()
            d["path"] = re.sub(r"/\d+", "/{id}", d["req"].split()[1])
            records.append(d)
    blob = json.dumps(records)
    back = json.loads(blob)
    report = []
    for r in back:
        report.append("{ip:>15} {user:<8} {code} {path}".format(**r))
        report.append(f"{r['ts']}|{len(r['req']):04d}")
    return len("\n".join(report))
