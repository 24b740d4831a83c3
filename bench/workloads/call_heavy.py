"""Call-heavy: recursion and many small methods, almost no allocation."""

DESCRIPTION = "recursion (fib), small methods and property calls"


class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    def norm2(self):
        return self.dot(self)

    @property
    def first(self):
        return self.x


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def small(a):
    return a + 1


def run(scale=1.0):
    total = fib(28 if scale >= 1 else 24)
    v = Vec(3, 4)
    w = Vec(1, 2)
    for i in range(int(1500000 * scale)):
        total += v.norm2() + v.dot(w) + v.first + small(i)
    return total
