// BullMQ's side of bench/run_peers.py (bench/peers/bullmq_bench.py drives it; npm's bullmq from bench/node/, run
// with NODE_PATH at var/bench/node/node_modules).
//
//   node bullmq_bench.js worker     one Worker of concurrency 10 (BullMQ's documented worker: a Node process
//                                   holding a Worker), until SIGTERM
//   node bullmq_bench.js produce    the producer: reads `enqueue N`, `bulk N` or `probe` lines on stdin, answers
//                                   each with one JSON line (see _common.py ForeignProducer)
//
// The job body is the harness's (bench/peers/_common.py record_job): one INCR; the marked completions one SET of
// the time; a latency probe RPUSHes its pick-up delay instead.
"use strict";
const { Queue, Worker } = require("bullmq");
const IORedis = require("ioredis");
const readline = require("node:readline");
const { performance } = require("node:perf_hooks");

const QUEUE = "bench";
const CONCURRENCY = 10;
const BULK_BATCH = 1000;
const URL = process.env.BENCH_REDIS_URL;
const MARKS = new Set((process.env.BENCH_MARK_AT || "").split(",").filter(Boolean).map(Number));
const TASK_SLEEP_MS = Number(process.env.BENCH_TASK_SLEEP_MS || 0);
const now = () => (performance.timeOrigin + performance.now()) / 1000; // wall clock in s, sub-ms

function connection() {
  return new IORedis(URL, { maxRetriesPerRequest: null }); // what BullMQ requires of a Worker's connection
}

function worker() {
  const stamps = connection(); // the task's own connection, apart from BullMQ's
  const w = new Worker(
    QUEUE,
    async (job) => {
      const started = now();
      if (job.data.t_enq !== undefined) {
        await stamps.rpush("bench:latency", String(started - job.data.t_enq));
        return;
      }
      if (TASK_SLEEP_MS) await new Promise((resolve) => setTimeout(resolve, TASK_SLEEP_MS));
      const done = await stamps.incr("bench:counter");
      if (MARKS.has(done)) await stamps.set(`bench:mark:${done}`, String(now()));
    },
    { connection: connection(), concurrency: CONCURRENCY },
  );
  const stop = async () => {
    await w.close();
    stamps.disconnect();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

function cpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

async function timed(work) {
  const t0 = performance.now();
  const c0 = cpuSeconds();
  await work();
  return JSON.stringify({ elapsed_s: (performance.now() - t0) / 1000, cpu_s: cpuSeconds() - c0 });
}

async function produce() {
  const payload = JSON.parse(process.env.BENCH_PAYLOAD_JSON);
  const queue = new Queue(QUEUE, { connection: connection() });
  await queue.waitUntilReady();
  console.log(JSON.stringify({ ready: true }));
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [command, count] = line.split(" ");
    const n = Number(count);
    if (command === "enqueue") {
      console.log(await timed(async () => {
        for (let i = 0; i < n; i++) await queue.add("noop", payload);
      }));
    } else if (command === "bulk") {
      console.log(await timed(async () => {
        for (let start = 0; start < n; start += BULK_BATCH) {
          const size = Math.min(BULK_BATCH, n - start);
          await queue.addBulk(Array.from({ length: size }, () => ({ name: "noop", data: payload })));
        }
      }));
    } else if (command === "probe") {
      const t0 = performance.now();
      await queue.add("noop", { ...payload, t_enq: now() });
      console.log(JSON.stringify({ call_s: (performance.now() - t0) / 1000 }));
    } else {
      throw new Error(`unknown command: ${line}`);
    }
  }
  // stdin closed: the harness is done. Exit at once (a Queue's connection would keep Node alive).
  process.exit(0);
}

const role = process.argv[2];
if (role === "worker") worker();
else if (role === "produce") produce().catch((e) => { console.error(e); process.exit(1); });
else { console.error("usage: bullmq_bench.js worker|produce"); process.exit(2); }
