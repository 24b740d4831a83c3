"""Attach and detach times of `threadgraph attach` (bench/RESULTS.md, "Attach").

    python3 bench/attach_time.py [--rounds N] [--threads N]

Starts a ThreadingHTTPServer-like target without threadgraph (a pool of threads
that wait on a queue with a timeout, as a service's workers do), then N times:
runs `threadgraph attach TARGET`, and measures

* attach: from the command's start to its "attached" line, which it prints once
  the target records (the control thread enabled the recorder on every thread;
  the next event of any thread is recorded);
* the first record: from the command's start until the run's capture holds a
  thread's events chunk (the recorder flushes every half second, so this is
  the attach plus up to a flush period);
* detach: from `threadgraph detach TARGET` to its return (the target's recorder
  disabled, files closed, the program running as before).

Prints one JSON object: the medians and every round's figures, in seconds.
Needs gdb and ptrace permission, and threadgraph importable by this Python.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = r'''
import queue, sys, threading
work = queue.Queue()

def worker():
    keep = []
    while True:
        try:
            item = work.get(timeout=0.01)
        except queue.Empty:
            keep.append(bytearray(100))
            if len(keep) > 1000:
                keep.clear()
            continue

for i in range(int(sys.argv[1])):
    threading.Thread(target=worker, daemon=True, name="worker-%d" % i).start()
print("ready", flush=True)
sys.stdin.read()
'''


def has_events(run_dir):
    """A thread's events chunk is in the capture (kind 1 after the 40-byte header)."""
    path = os.path.join(run_dir, "capture.tg")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    pos = 40
    while pos + 12 <= len(data):
        kind = data[pos]
        length = int.from_bytes(data[pos + 8:pos + 12], "little")
        if kind == 1 and length:
            return True
        pos += 12 + length
    return False


def one_round(pid, base):
    cmd = [sys.executable, "-m", "threadgraph"]
    t0 = time.monotonic()
    att = subprocess.Popen(cmd + ["attach", "-o", base, str(pid)], stderr=subprocess.PIPE,
                           universal_newlines=True)
    line = att.stderr.readline()
    attached = time.monotonic() - t0
    if "attached" not in line:
        raise SystemExit("attach failed: " + line + att.stderr.read())
    run_dir = line.split("writing to ")[1].split("/ (")[0]
    if not os.path.isabs(run_dir):
        run_dir = os.path.join(os.getcwd(), run_dir)
    while not has_events(run_dir):
        time.sleep(0.005)
    first = time.monotonic() - t0
    t1 = time.monotonic()
    subprocess.run(cmd + ["detach", str(pid)], check=True, stderr=subprocess.DEVNULL)
    detached = time.monotonic() - t1
    att.communicate()
    return {"attach": attached, "first_record": first, "detach": detached}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=8)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "target.py")
        with open(script, "w") as f:
            f.write(TARGET)
        target = subprocess.Popen([sys.executable, script, str(opts.threads)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  universal_newlines=True)
        try:
            assert target.stdout.readline() == "ready\n"
            rounds = [one_round(target.pid, os.path.join(tmp, "out"))
                      for _ in range(opts.rounds)]
        finally:
            target.kill()
            target.wait()
    result = {k: round(statistics.median(r[k] for r in rounds), 3)
              for k in ("attach", "first_record", "detach")}
    result["rounds"] = rounds
    result["threads"] = opts.threads
    result["python"] = "%d.%d.%d" % sys.version_info[:3]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
