// kvscope's page in headless Chromium (Debian's /usr/bin/chromium driven by
// puppeteer-core; nothing downloads a browser), checked against the native CLI:
//   greedy tokens and per-step counters equal `kvscope generate --json`'s;
//   NO CACHE: the recomputed positions and the step's work equal `--no-cache`'s;
//   a screenshot is a real scene (many colours);
//   the page runs served with the isolation headers and without them (service worker);
//   random GPT-2 / Llama checkpoints through the folder picker generate what the CLI does;
//   a bad folder reaches the error panel.
// Usage: node tests/web/web_test.mjs --site build-web/site --cli build/kvscope --out DIR [--shots]
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(path.join(ROOT, 'tools/web/package.json'));
const puppeteer = require('puppeteer-core');

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true]);
  return acc;
}, []));
const SITE = path.resolve(args.site || 'build-web/site');
const CLI = path.resolve(args.cli || 'build/kvscope');
const OUT = path.resolve(args.out || 'build-web/test-out');
fs.mkdirSync(OUT, { recursive: true });

const PROMPT = 'The capital of France is';
const MAX_NEW = 12;
const COUNTERS = ['event', 'token', 'mode', 'flops', 'flops_total', 'kv_bytes', 'kv_positions', 'evicted', 'recomputed'];

let passed = 0, failed = 0;
const results = [];
function check(name, ok, detail = '') {
  results.push({ name, ok, detail });
  if (ok) passed++; else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ' — ' + detail : ''}`);
}

function cliRecords(model, extra = []) {
  const a = ['generate', '--json', '--prompt', PROMPT, '--max-new', String(MAX_NEW), ...extra];
  if (model) a.push('--model', model);
  const out = execFileSync(CLI, a, { encoding: 'utf8', env: { ...process.env, KVSCOPE_THREADS: '1' } });
  return out.trim().split('\n').map((l) => JSON.parse(l)).filter((r) => r.event !== 'done');
}

function serve(coi) {
  return new Promise((resolve, reject) => {
    const a = [path.join(ROOT, 'tools/web/serve.py'), SITE, '--port', '0'];
    if (coi) a.push('--coi');
    const p = spawn('/usr/bin/python3', a, { stdio: ['ignore', 'pipe', 'inherit'] });
    p.stdout.on('data', (d) => {
      const m = /http:\/\/localhost:(\d+)\//.exec(String(d));
      if (m) resolve({ proc: p, url: `http://localhost:${m[1]}/` });
    });
    p.on('exit', (c) => reject(new Error('serve.py exited ' + c)));
  });
}

async function launch() {
  return puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    userDataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'kvscope-chrome-')),
    protocolTimeout: 240000,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  });
}

// Waits for fn() in the page, riding out the service worker's one reload.
async function waitFor(page, fn, arg, timeoutMs, what) {
  const t0 = Date.now();
  for (;;) {
    try {
      const v = await page.evaluate(fn, arg);
      if (v) return v;
    } catch (e) { /* navigating */ }
    if (Date.now() - t0 > timeoutMs) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const fatalOf = (page) => page.evaluate(() => globalThis.kvscopePage && globalThis.kvscopePage.fatalError);

async function openPage(browser, url, viewport, logs) {
  const page = await browser.newPage();
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push('pageerror: ' + e.message));
  await page.setViewport(viewport);
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await waitFor(page, () => (globalThis.kvscopePage && (globalThis.kvscopePage.isReady ||
    globalThis.kvscopePage.fatalError)) ? true : false, null, 120000, 'the app to start');
  const fatal = await fatalOf(page);
  if (fatal) throw new Error('page: ' + fatal);
  // The embedded model is loaded (and plays its first prompt) before the test's commands.
  await waitFor(page, () => { const s = globalThis.kvscope.state(); return s && !s.loading && s.generated.length > 0; },
    null, 60000, 'the first token');
  const firstTokenS = (Date.now() - t0) / 1000;
  return { page, t0, firstTokenS };
}

const state = (page) => page.evaluate(() => globalThis.kvscope.state());
const command = (page, c) => page.evaluate((c) => globalThis.kvscope.command(c), c);

// Generates PROMPT in the page (paused, stepped) and returns the record of every step.
async function pageRecords(page) {
  let err = await command(page, { cmd: 'pause' });
  err ||= await command(page, { cmd: 'max_new', n: MAX_NEW });
  err ||= await command(page, { cmd: 'cache', mode: 'kv_cache' });
  err ||= await command(page, { cmd: 'prompt', text: PROMPT });
  if (err) throw new Error(err);
  await command(page, { cmd: 'play' });
  await waitFor(page, () => { const s = globalThis.kvscope.state(); return s.done && s.engine_idle; }, null, 120000,
    'the generation to finish');
  const s = await state(page);
  const recs = [];
  for (let i = 0; i < s.steps; i++) {
    await command(page, { cmd: 'scrub_to', step: i });
    await waitFor(page, (i) => globalThis.kvscope.state().shown_step === i, i, 10000, 'step ' + i);
    recs.push(await state(page));
  }
  return recs;
}

function compareRecords(name, pageRecs, cliRecs) {
  const tokensPage = pageRecs.map((r) => r.token), tokensCli = cliRecs.map((r) => r.token);
  check(`${name}: same greedy tokens as kvscope generate`, JSON.stringify(tokensPage) === JSON.stringify(tokensCli),
    `page ${JSON.stringify(tokensPage)} cli ${JSON.stringify(tokensCli)}`);
  const diffs = [];
  for (let i = 0; i < Math.min(pageRecs.length, cliRecs.length); i++)
    for (const k of COUNTERS)
      if (JSON.stringify(pageRecs[i][k]) !== JSON.stringify(cliRecs[i][k]))
        diffs.push(`step ${i} ${k}: page ${JSON.stringify(pageRecs[i][k])} cli ${JSON.stringify(cliRecs[i][k])}`);
  check(`${name}: counters equal the generate --json records (${COUNTERS.join(', ')})`,
    diffs.length === 0 && pageRecs.length === cliRecs.length, diffs.slice(0, 4).join('; '));
}

// Distinct colours of a screenshot, counted in the page (OffscreenCanvas).
async function colours(page, png) {
  return page.evaluate(async (b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bmp = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const c = new OffscreenCanvas(bmp.width, bmp.height);
    const g = c.getContext('2d');
    g.drawImage(bmp, 0, 0);
    const d = g.getImageData(0, 0, bmp.width, bmp.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return seen.size;
  }, Buffer.from(png).toString('base64'));
}

// Random GPT-2 and Llama checkpoints (tools/numpy_ref*.py) through the folder
// picker (<input webkitdirectory>): they generate what the CLI generates; a
// folder without weights reaches the error panel.
function makeModels() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvscope-web-models-'));
  const gpt2 = path.join(dir, 'random-gpt2'), llama = path.join(dir, 'random-llama'), bad = path.join(dir, 'bad');
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'tools/numpy_ref.py'), 'make', '--out', gpt2, '--layers', '2',
    '--heads', '2', '--embd', '32', '--ctx', '64', '--seed', '5']);
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'tools/numpy_ref_llama.py'), 'make', '--out', llama, '--seed', '3']);
  fs.mkdirSync(bad);
  fs.copyFileSync(path.join(gpt2, 'config.json'), path.join(bad, 'config.json'));
  fs.writeFileSync(path.join(bad, 'model.safetensors'), 'not a safetensors file');
  return { gpt2, llama, bad };
}

async function pickFolder(page, dir) {
  const input = await page.$('#picker');
  await input.uploadFile(dir);
  const name = path.basename(dir);
  await waitFor(page, (name) => { const s = globalThis.kvscope.state();
    return !s.loading && (s.model_dir.endsWith('/' + name) || s.model_error !== ''); }, name, 60000, 'loading ' + name);
}

async function userModels(page) {
  const m = makeModels();
  for (const [kind, dir] of [['GPT-2', m.gpt2], ['Llama', m.llama]]) {
    await pickFolder(page, dir);
    const s = await state(page);
    check(`folder picker: a random ${kind} checkpoint loads`, s.model_error === '' && s.model_dir.endsWith(path.basename(dir)),
      s.model_error);
    const recs = await pageRecords(page);
    const ref = cliRecords(dir);
    check(`folder picker: the random ${kind} generates what the CLI generates`,
      JSON.stringify(recs.map((r) => r.token)) === JSON.stringify(ref.map((r) => r.token)),
      `page ${JSON.stringify(recs.map((r) => r.token))} cli ${JSON.stringify(ref.map((r) => r.token))}`);
  }
  await pickFolder(page, m.bad);
  const s = await state(page);
  check('a bad folder shows the error panel (model_error / errors)', s.model_error !== '' || s.errors.length > 0,
    s.model_error || s.errors.join('; '));
}

// The page at a projector's and a phone's size, text scale 1 and 2.5 (PNGs in --out to look at).
async function viewportShots(browser, url, logs) {
  for (const [name, vp] of [['1280x720', { width: 1280, height: 720, deviceScaleFactor: 1 }],
    ['phone-390x844-dpr3', { width: 390, height: 844, deviceScaleFactor: 3, isMobile: true, hasTouch: true }]]) {
    const { page } = await openPage(browser, url, vp, logs);
    for (const scale of [1, 2.5]) {
      await command(page, { cmd: 'text_scale', scale });
      await new Promise((r) => setTimeout(r, 4000));
      const png = await page.screenshot({ path: path.join(OUT, `shot-${name}-text${scale}.png`) });
      const n = await colours(page, png);
      check(`screenshot ${name} text scale ${scale} is a real scene`, n > 500, `${n} colours`);
    }
    await page.close();
  }
}

async function main() {
  const cliKv = cliRecords(null), cliNoCache = cliRecords(null, ['--no-cache']);
  const coi = await serve(true), plain = await serve(false);
  const browser = await launch();
  const logs = [];
  try {
    // 1. served with COOP/COEP
    const { page, firstTokenS } = await openPage(browser, coi.url, { width: 1280, height: 720, deviceScaleFactor: 1 },
      logs);
    check('coi: page is cross-origin isolated', await page.evaluate(() => self.crossOriginIsolated === true));
    console.log(`info time from page open to the first generated token: ${firstTokenS.toFixed(2)} s`);
    const recs = await pageRecords(page);
    compareRecords('coi', recs, cliKv);
    // Decode speed: the records' own forward times (ms), page vs native single thread.
    const med = (a) => { const t = [...a].sort((x, y) => x - y); return t[Math.floor(t.length / 2)]; };
    const msPage = med(recs.slice(1).map((r) => r.ms)), msCli = med(cliKv.slice(1).map((r) => r.ms));
    console.log(`info decode: page ${(1000 / msPage).toFixed(0)} tokens/s (${msPage.toFixed(3)} ms/step, ` +
      `${await page.evaluate(() => navigator.hardwareConcurrency)} cores seen), native KVSCOPE_THREADS=1 ` +
      `${(1000 / msCli).toFixed(0)} tokens/s (${msCli.toFixed(3)} ms/step): ${(100 * msCli / msPage).toFixed(0)} %`);
    // NO CACHE from a mid-sequence step: the next step recomputes every position.
    const k = 4;
    await command(page, { cmd: 'pause' });
    await command(page, { cmd: 'prompt', text: PROMPT });
    await waitFor(page, () => globalThis.kvscope.state().steps >= 1, null, 30000, 'the prefill');
    for (let i = 1; i < k; i++) {
      await command(page, { cmd: 'step' });
      await waitFor(page, (i) => globalThis.kvscope.state().steps > i && globalThis.kvscope.state().engine_idle, i,
        30000, 'step ' + i);
    }
    const err = await command(page, { cmd: 'cache', mode: 'no_cache' });
    await command(page, { cmd: 'step' });
    await waitFor(page, (k) => globalThis.kvscope.state().steps > k, k, 30000, 'the no-cache step');
    const nc = await state(page);
    const ref = cliNoCache[k];
    check('C / cache mode switches to NO CACHE and the recomputed positions show',
      !err && nc.mode === 'no_cache' && nc.recomputed === ref.recomputed && nc.recomputed > 0 &&
      nc.flops === ref.flops && nc.kv_bytes === ref.kv_bytes && nc.token === ref.token,
      `page mode ${nc.mode} recomputed ${nc.recomputed} flops ${nc.flops}; cli --no-cache step ${k}: ` +
      `recomputed ${ref.recomputed} flops ${ref.flops}`);
    await command(page, { cmd: 'cache', mode: 'kv_cache' });
    await command(page, { cmd: 'play' });
    await new Promise((r) => setTimeout(r, 1500));
    const png = await page.screenshot({ path: path.join(OUT, 'page-1280x720.png') });
    const n = await colours(page, png);
    check('screenshot is a real scene (many colours)', n > 500, `${n} colours`);
    // The window's screenshot (F12) arrives as a PNG download.
    const dl = fs.mkdtempSync(path.join(OUT, 'download-'));
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dl });
    await command(page, { cmd: 'screenshot' });
    let pngs = [];
    for (let i = 0; i < 100 && pngs.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      pngs = fs.readdirSync(dl).filter((f) => /^kvscope-.*\.png$/.test(f));
    }
    const head = pngs.length ? fs.readFileSync(path.join(dl, pngs[0])).subarray(0, 8).toString('hex') : '';
    check('screenshot command downloads a PNG', head === '89504e470d0a1a0a', pngs.join(', ') || 'no download');
    const bad = await command(page, { cmd: 'no_such_command' });
    check('an unknown command is refused with a message', /unknown cmd/.test(bad), bad);
    // Frame time while generating.
    const ft = await page.evaluate(() => { const t = [...globalThis.kvscopePage.frameTimes].slice(-120).sort((a, b) => a - b);
      return t.length ? t[Math.floor(t.length / 2)] : 0; });
    console.log(`info median frame time (last 120 frames): ${ft.toFixed(1)} ms`);
    await page.close();

    if (args.shots) await viewportShots(browser, coi.url, logs);
    // 2. served without the headers: the service worker adds them and reloads once.
    const p2 = await openPage(browser, plain.url, { width: 1024, height: 640, deviceScaleFactor: 2 }, logs);
    const iso = await p2.page.evaluate(() => self.crossOriginIsolated === true);
    const recs2 = await pageRecords(p2.page);
    check('plain host: service worker isolates the page and it generates the same tokens',
      iso && JSON.stringify(recs2.map((r) => r.token)) === JSON.stringify(cliKv.map((r) => r.token)),
      `isolated ${iso}, tokens ${JSON.stringify(recs2.map((r) => r.token))}`);
    const size = await p2.page.evaluate(() => [document.getElementById('canvas').width, window.innerWidth]);
    check('canvas backbuffer follows devicePixelRatio', size[0] === 2 * size[1], `canvas ${size[0]} px, page ${size[1]} css px`);
    await userModels(p2.page);
    await p2.page.close();
  } catch (e) {
    check('page run', false, e.message);
  } finally {
    fs.writeFileSync(path.join(OUT, 'console.log'), logs.join('\n'));
    fs.writeFileSync(path.join(OUT, 'results.json'), JSON.stringify(results, null, 1));
    await browser.close();
    coi.proc.kill();
    plain.proc.kill();
  }
  console.log(`web tests: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
