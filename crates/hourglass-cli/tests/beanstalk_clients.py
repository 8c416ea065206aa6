"""Real beanstalkd clients from PyPI (greenstalk, pystalk) against
`hourglass serve --beanstalk`: the port is the first argument. Each step
asserts what the client saw; the script prints what it did."""

import sys

import greenstalk
import pystalk

port = int(sys.argv[1])

# greenstalk: priorities, delays, bury and kick, stats, tubes.
with greenstalk.Client(("127.0.0.1", port), use="emails", watch="emails") as client:
    low = client.put("low", priority=500)
    high = client.put("high", priority=5)
    later = client.put("later", delay=1)
    job = client.reserve(timeout=1)
    assert (job.id, job.body) == (high, "high"), (job.id, job.body)
    client.bury(job, priority=5)
    assert client.peek_buried().id == high
    assert client.kick(10) == 1
    job = client.reserve(timeout=1)
    assert job.id == high
    client.delete(job)
    job = client.reserve(timeout=1)
    assert job.id == low
    client.release(job, priority=1, delay=0)
    job = client.reserve(timeout=1)
    assert job.id == low and client.stats_job(job)["pri"] == 1
    client.touch(job)
    client.delete(job)
    # The delayed job comes due within its second, to a waiting reserve.
    job = client.reserve(timeout=3)
    assert (job.id, job.body) == (later, "later")
    client.delete(job)
    try:
        client.reserve(timeout=0)
        raise AssertionError("nothing should be left")
    except greenstalk.TimedOutError:
        pass
    assert "emails" in client.tubes()
    assert client.stats_tube("emails")["current-jobs-ready"] == 0
    assert client.stats()["current-connections"] >= 1
    print("greenstalk: put, priorities, delay, bury, kick, release, touch, delete, stats: ok")

# pystalk: its own client, its own commands.
client = pystalk.BeanstalkClient("127.0.0.1", port)
client.use("reports")
client.watch("reports")
# put_job answers (status, id).
ids = [client.put_job("report %d" % n)[1] for n in range(3)]
for expected in ids:
    job = client.reserve_job(timeout=1)
    assert job.job_id == expected, (job.job_id, expected)
    assert job.job_data.decode() == "report %d" % ids.index(expected)
    client.delete_job(job.job_id)
assert client.stats_tube("reports")["total-jobs"] == 3
print("pystalk: use, watch, put, reserve, delete, stats-tube: ok")
