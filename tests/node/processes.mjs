// Child processes for the client tests: start a binary of CGN_BIN_DIR with a port file, wait for
// its port, stop them all at the end.
import { spawn } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const binDir = resolve(process.env.CGN_BIN_DIR || join(here, '../../build/bin'));
const children = [];
const byPort = new Map();

// Starts `bin` with `args`; resolves to the port it writes to `portFile`.
export function start(bin, args, portFile) {
  const child = spawn(join(binDir, bin), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log += d; });
  child.log = () => log;
  children.push(child);
  return waitForPort(portFile, child).then((port) => {
    byPort.set(port, child);
    return port;
  });
}

// Stops the child listening on `port`; resolves once it has exited.
export function stopOne(port) {
  const child = byPort.get(port);
  if (!child) throw new Error(`no child on port ${port}`);
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  return exited;
}

async function waitForPort(file, child) {
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) {
    if (existsSync(file)) {
      const port = Number(readFileSync(file, 'utf8').trim());
      if (port > 0) return port;
    }
    if (child.exitCode !== null) throw new Error(`process exited early: ${child.log()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no port file ${file}: ${child.log()}`);
}

// Polls the router's /health until `n` nodes are healthy.
export async function waitHealthy(base, n) {
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline) {
    const h = await (await fetch(`${base}/health`)).json();
    if (h.nodes_healthy === n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${n} nodes never became healthy`);
}

// Three vLLM-flavour simulators serving `model` behind one router (kv policy), in `dir`; resolves
// once all three are healthy, to the router's base URL and the simulators' ports.
export async function startSimCluster(dir, model) {
  const simPorts = [];
  for (const name of ['s0', 's1', 's2']) {
    const pf = join(dir, `${name}.port`);
    simPorts.push(await start('cgn-engine-sim', ['--flavor', 'vllm', '--model', model, '--time-scale', '0.001',
      '--port', '0', '--port-file', pf], pf));
  }
  const pf = join(dir, 'router.port');
  const args = ['--listen', '127.0.0.1:0', '--port-file', pf, '--poll-interval-ms', '100'];
  for (const p of simPorts) args.push('--node', `http://127.0.0.1:${p}`);
  const base = `http://127.0.0.1:${await start('cgn-router', args, pf)}`;
  await waitHealthy(base, simPorts.length);
  return { base, simPorts };
}

export function stopAll() {
  for (const c of children) c.kill('SIGTERM');
}
