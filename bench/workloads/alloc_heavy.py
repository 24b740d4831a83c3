"""Allocation-heavy: dicts, lists and strings created and dropped."""

DESCRIPTION = "building and dropping dicts, lists and strings"


def make_record(i):
    return {"id": i, "name": "user%d" % i, "tags": [str(i), str(i * 2)], "score": i * 0.5}


def run(scale=1.0):
    keep = []
    for rnd in range(int(100 * scale) or 1):
        rows = [make_record(i) for i in range(6000)]
        index = {r["name"]: r for r in rows}
        text = ",".join(r["name"] for r in rows)
        parts = text.split(",")
        joined = [p.upper() + "-" + p[::-1] for p in parts]
        keep.append(len(index) + len(joined))
        del rows, index, text, parts, joined
    return sum(keep)
