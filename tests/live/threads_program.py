"""A program with N threads for the tests of pinlab ps and pin (run as a real process).

    python threads_program.py DIR [--threads N] [--seconds S] [--status K] [--spin]

The main thread creates N threads one after the other (each reports its tid before the next is
created, so creation order is known), then writes DIR/ready.json: {"pid", "tids"} (main first,
then the threads in creation order). The threads wake up every 2 ms (or spin with --spin) until
DIR/stop-workers or DIR/stop exists; the main thread waits for DIR/stop (or S seconds), joins
the threads and exits with status K.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--spin", action="store_true")
    args = parser.parse_args()
    stop, stop_workers = os.path.join(args.dir, "stop"), os.path.join(args.dir, "stop-workers")

    def work(reported: list[int], started: threading.Event) -> None:
        reported.append(threading.get_native_id())
        started.set()
        while not (os.path.exists(stop_workers) or os.path.exists(stop)):
            if args.spin:
                end = time.perf_counter() + 0.002
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(0.002)

    tids = [threading.get_native_id()]
    threads = []
    for _ in range(args.threads):
        started = threading.Event()
        thread = threading.Thread(target=work, args=(tids, started))
        thread.start()
        started.wait()
        threads.append(thread)
    ready = os.path.join(args.dir, "ready.json")
    with open(ready + ".tmp", "w") as out:
        json.dump({"pid": os.getpid(), "tids": tids}, out)
    os.rename(ready + ".tmp", ready)
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    while not os.path.exists(stop) and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.005)
    with open(stop_workers, "w"):
        pass
    for thread in threads:
        thread.join()
    return args.status


if __name__ == "__main__":
    raise SystemExit(main())
