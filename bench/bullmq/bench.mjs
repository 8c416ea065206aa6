// BullMQ under the workloads of `hourglass-load`, on a Redis given by
// REDIS_PORT (bench/queue-vs-bullmq.sh starts one of its own). One line of
// results per run, in the words `hourglass-load` uses, so the two read side
// by side.
//
//   node bench.mjs enqueue  TASKS PRODUCERS
//   node bench.mjs lateness RATE SECONDS DELAY_MS WORKERS
//   node bench.mjs drain    TASKS WORKERS
//   node bench.mjs burst    TASKS WORKERS
//   node bench.mjs memory   TASKS
//   node bench.mjs idle     SECONDS WORKERS
//   node bench.mjs redelivery LOCK_MS   (a worker holding a job is killed)
//
// With PUSH_URL set, a worker's processor POSTs each job there (bench/push-vs-bullmq.sh).
//
// Each worker is one BullMQ Worker (one connection) processing up to
// CONCURRENCY jobs at once; a job is done (acked) when its processor returns.
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const connection = { host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6379) };
const CONCURRENCY = 64;
const PAYLOAD = { f: 'x'.repeat(Number(process.env.PAYLOAD_BYTES ?? 64)) };
const [workload, ...rest] = process.argv.slice(2);
const args = rest.map(Number);
const name = process.env.QUEUE ?? `bench-${Date.now()}`;
const queue = new Queue(name, { connection });
const redis = new IORedis(connection);

const percentile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const ms = (x) => x.toFixed(2);
const sleep = (t) => new Promise((resolve) => setTimeout(resolve, t));

async function commands() {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)[1]);
}
async function usedMemory() {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

/// With PUSH_URL, each job is POSTed there as hourglass pushes a task: its
/// data as the JSON body, its due time in `Hourglass-Due-At` (Unix ms); not
/// a 2xx fails the job. (Node's fetch keeps connections alive.)
const PUSH_URL = process.env.PUSH_URL;
async function push(job) {
  const headers = {
    'content-type': 'application/json',
    'hourglass-task-id': String(job.id),
    'hourglass-due-at': String(job.timestamp + (job.opts.delay ?? 0)),
  };
  const res = await fetch(PUSH_URL, { method: 'POST', headers, body: JSON.stringify(job.data) });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
}

/// Workers that record each job's lateness (ms after its due time) and call
/// `done` when `total` jobs are processed.
function workers(count, total, onJob) {
  let processed = 0;
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  const all = [];
  for (let i = 0; i < count; i++) {
    all.push(new Worker(name, async (job) => {
      if (PUSH_URL) await push(job);
      onJob(Date.now() - (job.timestamp + (job.opts.delay ?? 0)));
      processed += 1;
      if (processed === total) finish();
    }, { connection, concurrency: CONCURRENCY }));
  }
  return { all, finished };
}

async function pool(tasks, concurrency, send) {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < tasks) {
      next += 1;
      await send();
    }
  }));
}

async function close(list) {
  await Promise.all(list.map((w) => w.close()));
}

switch (workload) {
  case 'enqueue': {
    const [tasks, producers] = args;
    const before = await commands();
    const started = performance.now();
    await pool(tasks, producers, () => queue.add('t', PAYLOAD, { delay: 3_600_000 }));
    const s = (performance.now() - started) / 1000;
    const cmds = (await commands()) - before;
    console.log(`BullMQ enqueue: ${tasks} tasks from ${producers} producers in ${s.toFixed(2)}s: ${(tasks / s).toFixed(0)} tasks/s; ${(cmds / tasks).toFixed(1)} redis commands a task`);
    break;
  }
  case 'lateness': {
    const [rate, seconds, delayMs, count] = args;
    const total = rate * seconds;
    const late = [];
    const { all, finished } = workers(count, total, (l) => late.push(l));
    await Promise.all(all.map((w) => w.waitUntilReady()));
    const before = await commands();
    const started = performance.now();
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      queue.add('t', PAYLOAD, { delay: delayMs }).catch((e) => console.error(e));
    }
    await Promise.race([finished, sleep(seconds * 1000 + delayMs + 60_000)]);
    const cmds = (await commands()) - before;
    await close(all);
    late.sort((a, b) => a - b);
    console.log(`BullMQ lateness: ${late.length} of ${total} tasks received (sent at ${rate}/s, due ${delayMs} ms later, ${count} workers x ${CONCURRENCY}): p50 ${ms(percentile(late, 0.5))} ms, p99 ${ms(percentile(late, 0.99))} ms, max ${ms(late[late.length - 1])} ms after due; ${(cmds / total).toFixed(1)} redis commands a task`);
    break;
  }
  case 'drain': {
    const [tasks, count] = args;
    for (let i = 0; i < tasks; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, tasks - i) }, () => ({ name: 't', data: PAYLOAD })));
    }
    const before = await commands();
    const started = performance.now();
    const { all, finished } = workers(count, tasks, () => {});
    await finished;
    const s = (performance.now() - started) / 1000;
    const cmds = (await commands()) - before;
    await close(all);
    console.log(`BullMQ drain: ${tasks} tasks claimed and acked by ${count} workers x ${CONCURRENCY} in ${s.toFixed(2)}s: ${(tasks / s).toFixed(0)} tasks/s; ${(cmds / tasks).toFixed(1)} redis commands a task`);
    break;
  }
  case 'burst': {
    const [tasks, count] = args;
    const late = [];
    const { all, finished } = workers(count, tasks, (l) => late.push(l));
    await Promise.all(all.map((w) => w.waitUntilReady()));
    // Every job due at the same instant, far enough ahead to add them all
    // (5,000 a second, as hourglass-load's burst).
    const due = Date.now() + 2_000 + tasks / 5;
    for (let i = 0; i < tasks; i += 1000) {
      const delay = due - Date.now();
      await queue.addBulk(Array.from({ length: Math.min(1000, tasks - i) }, () => ({ name: 't', data: PAYLOAD, opts: { delay } })));
    }
    const added = Date.now();
    if (added >= due) {
      // Deliveries timed while jobs were still being added measure neither.
      console.error(`adding took past the due time by ${added - due} ms: fewer tasks`);
      process.exit(1);
    }
    await finished;
    const last = Date.now() - due;
    await close(all);
    late.sort((a, b) => a - b);
    console.log(`BullMQ burst: ${tasks} tasks due at once, delivered to ${count} workers x ${CONCURRENCY}: the last ${last} ms after the due time (p50 ${ms(percentile(late, 0.5))} ms)`);
    break;
  }
  case 'memory': {
    const [tasks] = args;
    const before = await usedMemory();
    for (let i = 0; i < tasks; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, tasks - i) }, () => ({ name: 't', data: PAYLOAD, opts: { delay: 3_600_000 } })));
    }
    const after = await usedMemory();
    console.log(`BullMQ memory: ${tasks} delayed tasks of ${JSON.stringify(PAYLOAD).length} B payload: ${((after - before) / tasks).toFixed(0)} bytes of redis memory a task`);
    break;
  }
  case 'idle': {
    const [seconds, count] = args;
    const { all } = workers(count, Infinity, () => {});
    await Promise.all(all.map((w) => w.waitUntilReady()));
    await sleep(1_000);
    const before = await commands();
    await sleep(seconds * 1000);
    const cmds = (await commands()) - before;
    await close(all);
    console.log(`BullMQ idle: ${count} workers, nothing due, ${seconds} s: ${(cmds / seconds).toFixed(1)} redis commands a second`);
    break;
  }
  case 'redelivery': {
    // A worker in a process of its own takes the job and is killed with
    // SIGKILL; another worker, with the same lock duration and a stalled
    // check as often as the lock lasts (BullMQ's defaults are 30 s each),
    // waits for the job to come back.
    const [lockMs] = args;
    const { fork } = await import('node:child_process');
    await queue.add('t', PAYLOAD);
    const holder = fork(new URL(import.meta.url), ['hold', String(lockMs)], { env: { ...process.env, QUEUE: name } });
    await new Promise((resolve) => holder.on('message', resolve));
    holder.kill('SIGKILL');
    const killed = Date.now();
    let back;
    const returned = new Promise((resolve) => { back = resolve; });
    const worker = new Worker(name, async () => back(Date.now() - killed),
      { connection, lockDuration: lockMs, stalledInterval: lockMs });
    const ms = await returned;
    await worker.close();
    console.log(`BullMQ redelivery: a worker holding a job killed (lockDuration = stalledInterval = ${lockMs} ms): delivered again ${ms} ms later`);
    break;
  }
  case 'hold': {
    const [lockMs] = args;
    new Worker(process.env.QUEUE, async () => {
      process.send('holding');
      await sleep(3_600_000);
    }, { connection, lockDuration: lockMs, stalledInterval: lockMs });
    await sleep(3_600_000);
    break;
  }
  default:
    console.error(`unknown workload ${workload}`);
    process.exit(2);
}
await queue.close();
redis.disconnect();
process.exit(0);
