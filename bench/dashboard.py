#!/usr/bin/env python3
"""What the dashboard costs the server, and a demo load to look at it.

    bench/dashboard.py fill SERVER [TASKS]   one queue "big": TASKS scheduled in an hour (default
                                             1,000,000), 800 due, 200 dead with a last error
    bench/dashboard.py time SERVER           21 requests of each page the dashboard makes; medians
    bench/dashboard.py queues SERVER [N]     N more queues (default 980) with deliveries, then
                                             the overview, /v1/queues and /metrics timed
    bench/dashboard.py demo SERVER SECONDS   producers and consumers on four queues, for screenshots

SERVER is a base URL such as http://127.0.0.1:7463. Standard library only.
"""
import json
import random
import statistics
import sys
import threading
import time
import urllib.request


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request) as response:
        text = response.read()
    return json.loads(text) if text else None


def timed(base, path):
    started = time.perf_counter()
    with urllib.request.urlopen(base + path) as response:
        body = response.read()
    took = (time.perf_counter() - started) * 1000
    return took, (json.loads(body) if not path.startswith("/metrics") else None)


def measure(base, label, path, runs=21):
    times = [timed(base, path)[0] for _ in range(runs)]
    print("%-48s median %7.2f ms  (min %.2f, max %.2f)" % (label, statistics.median(times), min(times), max(times)))


def fill(base, tasks=1_000_000):
    batch = {"tasks": [{"payload": {"n": i}, "delay_ms": 3_600_000 + i} for i in range(1000)]}
    started = time.time()
    for _ in range(tasks // 1000):
        call(base, "POST", "/v1/queues/big/tasks/batch", batch)
    due = [{"payload": {"due": i}, "max_attempts": 1 if i < 200 else 5} for i in range(1000)]
    call(base, "POST", "/v1/queues/big/tasks/batch", {"tasks": due})
    left = 200
    while left > 0:
        for task in call(base, "POST", "/v1/queues/big/claim", {"max": min(left, 200)})["tasks"]:
            call(base, "POST", "/v1/tasks/%d/nack" % task["id"], {"lease": task["lease"], "reason": "boom"})
            left -= 1
    print("filled in %.1f s" % (time.time() - started))


def pages(base):
    page = "/v1/queues/big/tasks?limit=50"
    measure(base, "overview", "/v1/overview")
    measure(base, "queue page, all, first 50", page)
    for state in ["scheduled", "due", "dead", "leased"]:
        measure(base, "queue page, %s, first 50" % state, page + "&state=" + state)
    _, listed = timed(base, page + "&state=scheduled")
    for _ in range(2000):
        _, listed = timed(base, page + "&state=scheduled&after=" + listed["next"])
    measure(base, "queue page, scheduled, page 2,001 (cursor)", page + "&state=scheduled&after=" + listed["next"])
    measure(base, "one task", "/v1/tasks/500000")
    measure(base, "metrics", "/metrics")


def queues(base, count=980):
    for q in range(count):
        call(base, "POST", "/v1/queues/q%03d/tasks/batch" % q, {"tasks": [{"payload": i} for i in range(10)]})
        call(base, "POST", "/v1/queues/q%03d/claim" % q, {"max": 5})
    for path in ["/v1/overview", "/v1/queues", "/metrics"]:
        measure(base, "%s with %d queues more" % (path, count), path)


def demo(base, seconds):
    stop = time.time() + seconds
    reasons = ["SMTP 451: mailbox busy", "upstream 503 Service Unavailable", "card declined (code 51)"]

    def produce(queue, rate, delay_ms):
        n = 0
        while time.time() < stop:
            batch = [{"payload": {"queue": queue, "n": n + i, "to": "user%d@example.com" % (n + i)},
                      "delay_ms": random.randint(*delay_ms)} for i in range(10)]
            call(base, "POST", "/v1/queues/%s/tasks/batch" % queue, {"tasks": batch})
            n += 10
            time.sleep(10 / rate * random.uniform(0.5, 1.5))

    def consume(queue, fail):
        while time.time() < stop:
            for task in call(base, "POST", "/v1/queues/%s/claim" % queue, {"max": 20, "wait_ms": 1000, "lease_ms": 10000})["tasks"]:
                if random.random() < fail:
                    body = {"lease": task["lease"], "delay_ms": 2000, "reason": random.choice(reasons)}
                    call(base, "POST", "/v1/tasks/%d/nack" % task["id"], body)
                else:
                    call(base, "POST", "/v1/tasks/%d/ack" % task["id"], {"lease": task["lease"]})

    threads = [threading.Thread(target=produce, args=("emails", 120, (0, 3000))),
               threading.Thread(target=produce, args=("payments", 40, (0, 1000))),
               threading.Thread(target=produce, args=("reports", 5, (600000, 3600000))),
               threading.Thread(target=produce, args=("webhooks", 30, (0, 500))),
               threading.Thread(target=consume, args=("emails", 0.02)),
               threading.Thread(target=consume, args=("payments", 0.3))]
    call(base, "POST", "/v1/queues/reports/pause", {})
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command, base, rest = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3:]
    if command == "fill":
        fill(base, *map(int, rest))
    elif command == "time":
        pages(base)
    elif command == "queues":
        queues(base, *map(int, rest))
    elif command == "demo":
        demo(base, float(rest[0]))
    else:
        sys.exit(__doc__)
