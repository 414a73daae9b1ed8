// BullMQ's side of bench/workflow_peers.py: a FlowProducer flow, one parent with N children (run with Node, NODE_PATH
// at var/bench/node/node_modules).
//
//   node fanin_bullmq.js worker URL      one Worker, concurrency 10, until SIGTERM
//   node fanin_bullmq.js create URL N    one FlowProducer.add call; prints {"t0": ..., "created_s": ...}
//
// Stamps as in bench/peers/fanin_jobconsole.py.
"use strict";
const { FlowProducer, Worker } = require("bullmq");
const IORedis = require("ioredis");
const { performance } = require("node:perf_hooks");

const QUEUE = "fan";
const now = () => (performance.timeOrigin + performance.now()) / 1000; // wall clock in s, sub-ms

function connection(url) {
  return new IORedis(url, { maxRetriesPerRequest: null });
}

async function worker(url) {
  const stamps = connection(url);
  const w = new Worker(
    QUEUE,
    async (job) => {
      if (job.name === "member") {
        await stamps.rpush("bench:ends", String(now()));
        return job.data.i;
      }
      await stamps.set("bench:cb_start", String(now()));
      const values = await job.getChildrenValues();
      const total = Object.values(values).reduce((a, b) => a + b, 0);
      await stamps.rpush("bench:done", JSON.stringify({ cb_end: now(), sum: total }));
      return total;
    },
    { connection: connection(url), concurrency: 10 },
  );
  const stop = async () => {
    await w.close();
    stamps.disconnect();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

async function create(url, n) {
  const conn = connection(url);
  await conn.ping();
  const flows = new FlowProducer({ connection: conn });
  const children = [];
  for (let i = 0; i < n; i++) children.push({ name: "member", queueName: QUEUE, data: { i } });
  const t0 = now();
  const p0 = performance.now();
  await flows.add({ name: "callback", queueName: QUEUE, data: {}, children });
  const created = (performance.now() - p0) / 1000;
  console.log(JSON.stringify({ t0, created_s: created }));
  await flows.close();
  conn.disconnect();
}

const [role, url, n] = process.argv.slice(2);
if (role === "worker") worker(url);
else if (role === "create") create(url, Number(n)).catch((e) => { console.error(e); process.exit(1); });
else { console.error("usage: fanin_bullmq.js worker|create URL [N]"); process.exit(2); }
