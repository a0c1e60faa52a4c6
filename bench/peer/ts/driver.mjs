// The TypeScript-client side of bench/peer: the official MCP TypeScript SDK
// drives one server over stdio with the same work as the Go client (write a
// file, then read it back and check it), and reports what it measured.
//
// The Go harness writes this file next to the pinned SDK it installed and
// runs it as
//
//	node driver.mjs '{"command": "...", "args": [...], "env": {...},
//	                  "tools": "fleetstate" | "peer", "dir": "...", "session": true}'
//
// It starts the server, prints {"ready": true} on one line, then for each
// line {"size": BYTES, "inflight": N, "overwrite": BOOL, "durationMs": MS}
// on standard input
// prints one line {"ops", "seconds", "opsPerSec", "write": {"p50Ms",
// "p99Ms"}, "read": {...}}, or {"error": "..."} if a call failed or a read
// did not return what was written. It exits when standard input closes.
import { createInterface } from "node:readline";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const cfg = JSON.parse(process.argv[2]);
const base = "fleetstate peer benchmark.\n";

// content returns size bytes that differ from one operation to the next,
// so a server that kept an old file or ignored the write cannot pass.
function content(size, worker, seq) {
  const stamp = `${worker}.${seq} `;
  let s = stamp;
  while (s.length < size) s += base;
  return s.slice(0, size);
}

// text returns the text of a tool result's first content, and throws on a
// tool error or a result of another shape.
function text(name, res) {
  const c = res.content?.[0];
  if (!c || c.type !== "text") throw new Error(`${name}: result has no text content`);
  if (res.isError) throw new Error(`${name}: ${c.text}`);
  return c.text;
}

function field(name, s, key) {
  const v = JSON.parse(s)[key];
  if (typeof v !== "string") throw new Error(`${name}: result ${JSON.stringify(s.slice(0, 100))} has no string ${key}`);
  return v;
}

// fileName is the name worker's seq-th operation writes: a new one for
// each create, the worker's one file for each overwrite (as the Go
// harness's fileName).
function fileName(worker, seq, overwrite) {
  return overwrite ? `w${worker}.txt` : `w${worker}-${seq}.txt`;
}

// writeRead does one operation and records each call's latency in ms.
async function writeRead(client, name, data, overwrite, lat) {
  let t = performance.now();
  let got;
  if (cfg.tools === "peer") {
    const path = join(cfg.dir, name);
    text("write_file", await client.callTool({ name: "write_file", arguments: { path, content: data } }));
    lat.write.push(performance.now() - t);
    t = performance.now();
    got = text("read_text_file", await client.callTool({ name: "read_text_file", arguments: { path } }));
  } else {
    const put = text("put", await client.callTool({
      name: "put",
      arguments: { agent_name: "bench", file_name: name, content: data, overwrite },
    }));
    const id = field("put", put, "id");
    lat.write.push(performance.now() - t);
    t = performance.now();
    got = field("get", text("get", await client.callTool({ name: "get", arguments: { id } })), "content");
  }
  lat.read.push(performance.now() - t);
  if (got !== data) throw new Error(`read back ${got.length} bytes that differ from the ${data.length} written`);
}

function quantiles(xs) {
  xs.sort((a, b) => a - b);
  const q = (p) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] : 0);
  return { p50Ms: q(0.5), p99Ms: q(0.99) };
}

let seq = 0;

async function measure(client, { size, inflight, overwrite, durationMs }) {
  const op = (w, lat) => {
    const n = seq++;
    return writeRead(client, fileName(w, n, overwrite), content(size, w, n), overwrite, lat);
  };
  // Warm-up: one operation per worker, not counted.
  for (let w = 0; w < inflight; w++) {
    await op(w, { write: [], read: [] });
  }
  const lat = { write: [], read: [] };
  let ops = 0;
  const start = performance.now();
  const deadline = start + durationMs;
  const worker = async (w) => {
    while (performance.now() < deadline) {
      await op(w, lat);
      ops++;
    }
  };
  await Promise.all(Array.from({ length: inflight }, (_, w) => worker(w)));
  const seconds = (performance.now() - start) / 1000;
  return { ops, seconds, opsPerSec: ops / seconds, write: quantiles(lat.write), read: quantiles(lat.read) };
}

function reply(v) {
  process.stdout.write(JSON.stringify(v) + "\n");
}

const transport = new StdioClientTransport({
  command: cfg.command,
  args: cfg.args ?? [],
  env: { ...process.env, ...(cfg.env ?? {}) },
  stderr: "inherit",
});
const client = new Client({ name: "fleetstate-peer-bench", version: "1" });
try {
  await client.connect(transport);
  // A client lists the tools before it calls them; the SDK then checks each
  // result against the tool's output schema, as it would for a user.
  await client.listTools();
  if (cfg.session) {
    text("new_session", await client.callTool({ name: "new_session", arguments: { name: "bench" } }));
  }
} catch (err) {
  reply({ error: `start: ${err.message}` });
  process.exit(1);
}
reply({ ready: true });

// One request at a time: the harness waits for each reply.
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  try {
    reply(await measure(client, JSON.parse(line)));
  } catch (err) {
    reply({ error: err.message });
  }
}
await client.close();
