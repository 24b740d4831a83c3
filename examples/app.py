"""The tutorial's application, unchanged: nothing here knows about threadgraph.

Several threads sleep, call random.randint and allocate lists and strings. Profile it
without touching it:

    threadgraph run --stack examples/app.py

examples/main.py is the same program with the profiler set up in main(), as the
tutorial's first step shows.
"""
import random
import threading
import time

THREAD_COUNT = 8
ROUNDS = 6


class DummyThread(threading.Thread):
    def __init__(self):
        super().__init__()
        self.data = []

    def doStuff(self):
        time.sleep(random.uniform(0.01, 0.08))
        for _ in range(10):
            random.randint(0, 100)
        # A few hundred KB per call, kept: each call is a peak worth looking at.
        self.data.append([random.randint(0, 9)] * random.randint(40000, 60000))
        self.data.append("x" * random.randint(100000, 200000))
        return len(self.data)

    def run(self):
        for _ in range(ROUNDS):
            self.doStuff()
            time.sleep(0.002)  # a pause between rounds
        # Drop most of it again: run() keeps only the last round's memory.
        self.data = self.data[-2:]
        return


def main():
    threads = [DummyThread() for _ in range(THREAD_COUNT)]
    [t.start() for t in threads]
    [t.join() for t in threads]


if __name__ == "__main__":
    main()
