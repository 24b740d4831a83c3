"""The tutorial's application with the profiler enabled in main().

Several threads sleep, call random.randint and allocate lists and strings; main()
sets up threadgraph exactly as the tutorial's first step shows. Run it with

    python examples/main.py [LOG_PATH]

and the profile lands in LOG_PATH/<pid>/ (default: /tmp/threadgraph-example, or
$THREADGRAPH_EXAMPLE_DIR). examples/app.py is the same program without the profiler
lines, for `threadgraph run`.
"""
import os
import random
import sys
import threading
import time

from thread_graph.Profiler import ProcessProfile

THREAD_COUNT = 8
ROUNDS = 6
LOG_PATH = (sys.argv[1] if len(sys.argv) > 1 else
            os.environ.get("THREADGRAPH_EXAMPLE_DIR", "/tmp/threadgraph-example"))


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
    profiler = ProcessProfile(default_log_path=LOG_PATH, profile="python")
    #profiler.setFilter("/path/to/code")
    #profiler.enableForkedProfile()
    profiler.trackStack()
    profiler.setProcessMemoryFrequence(20)
    profiler.enable()
    threads = [DummyThread() for _ in range(THREAD_COUNT)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    profiler.disable()
    print("profile written to %s" % profiler.output_dir)


if __name__ == "__main__":
    main()
