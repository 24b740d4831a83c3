"""Generator-heavy: pipelines of generators and generator expressions."""

DESCRIPTION = "chained generators, yield from, generator expressions"


def numbers(n):
    for i in range(n):
        yield i


def squares(it):
    for x in it:
        yield x * x


def evens(it):
    for x in it:
        if x % 2 == 0:
            yield x


def chunks(it, size):
    buf = []
    for x in it:
        buf.append(x)
        if len(buf) == size:
            yield buf
            buf = []
    if buf:
        yield buf


def flatten(it):
    for chunk in it:
        yield from chunk


def run(scale=1.0):
    n = int(3000000 * scale)
    total = 0
    for x in flatten(chunks(evens(squares(numbers(n))), 16)):
        total += x
    total += sum(x for x in range(n) if x & 3 == 0)
    return total
