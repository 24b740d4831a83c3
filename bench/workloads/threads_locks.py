"""Multi-threaded: 4 threads with short sleeps and a contended lock."""

import threading
import time

DESCRIPTION = "4 threads: work, short sleeps, one contended lock, a condition"


def _work(k):
    acc = []
    for i in range(200):
        acc.append((k, i, str(i)))
    return len(acc)


def _worker(lock, shared, iters):
    for i in range(iters):
        n = _work(i)
        with lock:
            shared["n"] = shared.get("n", 0) + n
            shared.setdefault("items", []).append(i)
        if i % 50 == 0:
            time.sleep(0.001)


def run(scale=1.0):
    lock = threading.Lock()
    shared = {}
    iters = int(9000 * scale) or 1
    threads = [threading.Thread(target=_worker, args=(lock, shared, iters), name="worker-%d" % k)
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return shared["n"]
