// Decode and prefill speed of the embedded model: the same `generate` in the
// page's WebAssembly (kvscope.cli, no frame drawn meanwhile), under node
// (kvscope-node.js, when --node-cli is given) and natively with one thread,
// interleaved so the machine's load falls on all alike. Info lines, not timed
// tests; the one check: the page's generate gives the native tokens.
// `node tests/web/web_test.mjs --only speed [--rounds N]` runs these alone.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const BENCH_NEW = 64;
// The prefill prompt: the start of a validation story (140 tokens).
const PREFILL_CHARS = 560;

const sorted = (a) => [...a].sort((x, y) => x - y);
const median = (a) => sorted(a)[Math.floor(a.length / 2)];
const fastTenth = (a) => sorted(a)[Math.floor(a.length / 10)];  // the 10th percentile of step times
const parseRecords = (lines) => lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
  .filter((r) => r.event !== 'done');
const decodeMs = (recs) => recs.slice(1).map((r) => r.ms);
const fmt = (a, digits = 0) => a.map((v) => v.toFixed(digits)).join(' / ');

function runners(ctx) {
  const env = { ...process.env, KVSCOPE_THREADS: '1' };
  const model = path.join(ctx.root, 'assets/models/kvscope-tiny');
  const native = (a) => parseRecords(execFileSync(ctx.cli, [...a, '--model', model], { encoding: 'utf8', env })
    .split('\n'));
  const inPage = async (a) => {
    const r = await ctx.page.evaluate((x) => globalThis.kvscope.cli(x), [...a, '--model', '/assets/models/kvscope-tiny']);
    if (r.rc !== 0) throw new Error('kvscope.cli generate: exit ' + r.rc + ' ' + [...r.lines, ...r.errors].join(' '));
    return parseRecords(r.lines);
  };
  const node = (a) => (ctx.nodeCli ? parseRecords(execFileSync('node', ['--no-experimental-fetch',
    path.resolve(ctx.nodeCli), ...a, '--model', model], { encoding: 'utf8', env }).split('\n')) : null);
  return { native, inPage, node };
}

// rounds x (native, page, node), each a list of records.
async function interleaved(run, a, rounds) {
  const t = { native: [], page: [], node: [] };
  for (let round = 0; round < rounds; round++) {
    t.native.push(run.native(a));
    t.page.push(await run.inPage(a));
    const nd = run.node(a);
    if (nd) t.node.push(nd);
  }
  return t;
}

async function decodeSpeed(ctx, run, rounds, drawnRecs) {
  const a = ['generate', '--json', '--prompt', 'The capital of France is', '--max-new', String(BENCH_NEW)];
  const t = await interleaved(run, a, rounds);
  const [nat, pg] = [t.native.at(-1), t.page.at(-1)];
  ctx.check('decode in the page (kvscope.cli generate) gives the native tokens',
    JSON.stringify(pg.map((r) => r.token)) === JSON.stringify(nat.map((r) => r.token)),
    `page ${pg.length} tokens, native ${nat.length}`);
  const tps = (runs, stat) => runs.map((recs) => 1000 / stat(decodeMs(recs)));
  const best = (a) => Math.max(...a);
  for (const [name, stat] of [['median step', median], ['10th-percentile step', fastTenth]]) {
    const n = tps(t.native, stat), p = tps(t.page, stat), nd = tps(t.node, stat);
    console.log(`info decode kvscope-tiny, tokens/s (${name} of ${BENCH_NEW}, ${rounds} rounds, best in []): ` +
      `native KVSCOPE_THREADS=1 ${fmt(n)} [${best(n).toFixed(0)}]; page kvscope.cli ${fmt(p)} ` +
      `[${best(p).toFixed(0)}] = ${(100 * best(p) / best(n)).toFixed(0)} % of native` +
      (nd.length ? `; node kvscope-node.js ${fmt(nd)} [${best(nd).toFixed(0)}]` : ''));
  }
  if (drawnRecs) {
    console.log(`info decode while the page draws (records' ms, ${await ctx.page.evaluate(() =>
      navigator.hardwareConcurrency)} cores seen): ${(1000 / median(decodeMs(drawnRecs))).toFixed(0)} tokens/s`);
  }
}

async function prefillSpeed(ctx, run, rounds) {
  const story = fs.readFileSync(path.join(ctx.root, 'assets/models/kvscope-tiny/val/stories.txt'), 'utf8');
  const a = ['generate', '--json', '--prompt', story.slice(0, PREFILL_CHARS), '--max-new', '1'];
  const t = await interleaved(run, a, rounds);
  const ms = (runs) => runs.map((recs) => recs[0].ms);
  const n = ms(t.native), p = ms(t.page), nd = ms(t.node);
  const best = (a) => Math.min(...a);
  ctx.check('prefill in the page gives the native token', t.page.at(-1)[0].token === t.native.at(-1)[0].token);
  console.log(`info prefill kvscope-tiny, ${t.native[0][0].tokens.length} prompt tokens, ms (${rounds} rounds, ` +
    `best in []): native ${fmt(n, 2)} [${best(n).toFixed(2)}]; page ${fmt(p, 2)} [${best(p).toFixed(2)}] = ` +
    `${(100 * best(n) / best(p)).toFixed(0)} % of native speed` +
    (nd.length ? `; node ${fmt(nd, 2)} [${best(nd).toFixed(2)}]` : ''));
}

// ctx: {root, cli, nodeCli, page, command, check}; drawnRecs: the records of a
// generation the page drew (their own ms), or null.
export async function speedChecks(ctx, drawnRecs, rounds = 3) {
  await ctx.command(ctx.page, { cmd: 'pause' });
  const run = runners(ctx);
  await decodeSpeed(ctx, run, rounds, drawnRecs);
  await prefillSpeed(ctx, run, rounds);
}
