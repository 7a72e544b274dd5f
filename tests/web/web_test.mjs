// kvscope's page in headless Chromium (Debian's /usr/bin/chromium driven by
// puppeteer-core; nothing downloads a browser), checked against the native CLI:
//   greedy tokens and per-step counters equal `kvscope generate --json`'s;
//   NO CACHE: the recomputed positions and the step's work equal `--no-cache`'s;
//   a screenshot is a real scene (many colours);
//   the page runs served with the isolation headers and without them (service worker);
//   random GPT-2 / Llama checkpoints through the folder picker generate what the CLI does;
//   a bad folder reaches the error panel;
//   models by Hugging Face id from a local stand-in for the hub (hub_checks.mjs);
//   the Training tab's checkpoints, fetched after the first token (training_checks.mjs);
//   settings chosen in one visit are there in the next (IndexedDB).
// Usage: node tests/web/web_test.mjs --site build-web/site --cli build/kvscope --out DIR [--shots]
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { bigModelChecks } from './big_model_checks.mjs';
import { hubChecks } from './hub_checks.mjs';
import { speedChecks } from './speed_checks.mjs';
import { trainingChecks } from './training_checks.mjs';

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

async function openPage(browser, url, viewport, logs, setup = null) {
  const page = await browser.newPage();
  if (setup) await setup(page);
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
  const long = path.join(dir, 'long-llama');
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'tools/numpy_ref.py'), 'make', '--out', gpt2, '--layers', '2',
    '--heads', '2', '--embd', '32', '--ctx', '64', '--seed', '5']);
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'tools/numpy_ref_llama.py'), 'make', '--out', llama, '--seed', '3']);
  // 2^24 positions: an f32 cache over all of them (2 layers x 4 K/V heads of 8) is 8 GiB, past the page's heap.
  execFileSync('/usr/bin/python3', [path.join(ROOT, 'tools/numpy_ref_llama.py'), 'make', '--out', long, '--seed', '4',
    '--kv-heads', '4', '--ctx', String(2 ** 24)]);
  fs.mkdirSync(bad);
  fs.copyFileSync(path.join(gpt2, 'config.json'), path.join(bad, 'config.json'));
  fs.writeFileSync(path.join(bad, 'model.safetensors'), 'not a safetensors file');
  return { gpt2, llama, bad, long };
}

// The lines of the page's progress overlay from now on (read with progressLines).
const watchProgress = (page) => page.evaluate(() => {
  globalThis.kvscopeProgressLines = [];
  const el = document.getElementById('hub-progress');
  new MutationObserver(() => globalThis.kvscopeProgressLines.push(el.textContent))
    .observe(el, { childList: true, characterData: true, subtree: true });
});
const progressLines = (page) => page.evaluate(() => globalThis.kvscopeProgressLines);

async function pickFolder(page, dir, timeoutMs = 60000) {
  const input = await page.$('#picker');
  await input.uploadFile(dir);
  const name = path.basename(dir);
  await waitFor(page, (name) => { const s = globalThis.kvscope.state();
    return !s.loading && (s.model_dir.endsWith('/' + name) || s.model_error !== ''); }, name, timeoutMs, 'loading ' + name);
}

async function userModels(page) {
  const m = makeModels();
  await watchProgress(page);
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
  const lines = await progressLines(page);
  check('folder picker: a line over the view says how much of the folder is copied into the page',
    lines.some((l) => /^Copying random-gpt2 into the page: [\d.]+ KiB of [\d.]+ KiB$/.test(l)), lines.join(' | '));
  // The loader's memory check in the page measures the WebAssembly heap (its maximum, 4 GiB less a page, less
  // what is allocated: a running page holds some, so below 4.00 GiB): the whole context of the long model asks
  // for more than that, refused before any weight is read.
  await pickFolder(page, m.long);
  const dir = (await state(page)).model_dir;
  const r = await page.evaluate((a) => globalThis.kvscope.cli(a),
    ['generate', '--model', dir, '--ctx', String(2 ** 24), '--max-new', '1', '--prompt', 'a']);
  const out = r.errors.join(' ');
  const avail = /but only ([\d.]+) (MB|GB|MiB|GiB) of memory is available/.exec(out);
  check('a context past the page\'s WebAssembly memory is refused by the loader, naming the heap left',
    r.rc === 1 && avail && out.includes(dir) && avail[2] === 'GiB' && Number(avail[1]) < 3.995, `rc ${r.rc}: ${out}`);
  await pickFolder(page, m.bad);
  const s = await state(page);
  const shown = s.model_error || s.errors.join('; ');
  check('a bad folder shows the error panel, naming its file as the user knows it (bad/model.safetensors)',
    /^bad\/model\.safetensors: /.test(s.model_error) && !shown.includes('/models/'), shown);
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitForFile(dir, re, ms = 10000) {
  for (let t = 0; t < ms; t += 100) {
    const f = fs.readdirSync(dir).filter((n) => re.test(n) && !n.endsWith('.crdownload'));
    if (f.length) return path.join(dir, f[0]);
    await sleep(100);
  }
  return '';
}

// Saved views in the page: "Save view" downloads the JSON the desktop writes
// (fields set here, read back from the file); "Open view..." takes a file from
// the browser's picker through the same reader: a changed camera is applied,
// a bad field reaches the error panel naming the field.
async function savedViews(page, dl) {
  await command(page, { cmd: 'camera', preset: 'side' });
  await command(page, { cmd: 'scrub_to', step: 3 });
  await waitFor(page, () => globalThis.kvscope.state().shown_step === 3, null, 10000, 'step 3');
  const err = await command(page, { cmd: 'save_view' });
  const file = await waitForFile(dl, /^kvscope-view.*\.json$/);
  let v = null;
  try { v = JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { /* checked below */ }
  check('save view downloads the view as JSON (camera, step, prompt)', !err && v && v.kvscope_view === 1 &&
    v.camera.preset === 'side' && v.step === 3 && v.prompt === PROMPT,
    err || (v ? `preset ${v.camera.preset} step ${v.step} prompt ${JSON.stringify(v.prompt)}` : 'no file ' + file));
  if (!v) return;
  const open = async (obj, name) => {
    const f = path.join(dl, name);
    fs.writeFileSync(f, JSON.stringify(obj));
    const [chooser] = await Promise.all([page.waitForFileChooser({ timeout: 10000 }),
      command(page, { cmd: 'open_view' })]);
    await chooser.accept([f]);
  };
  await command(page, { cmd: 'camera', preset: 'front' });
  await command(page, { cmd: 'dismiss_errors' });
  await open({ ...v, camera: { ...v.camera, preset: 'top' }, step: 2 }, 'top-view.json');
  const s = await waitFor(page, () => { const s = globalThis.kvscope.state();
    return s.camera === 'top' || s.errors.length ? s : null; }, null, 20000, 'the opened view');
  check('open view (file picker) applies the file: camera top', s.camera === 'top' && s.errors.length === 0,
    `camera ${s.camera} errors ${s.errors.join('; ')}`);
  await open({ ...v, camera: { ...v.camera, fov_y: 'wide' } }, 'bad-view.json');
  const e = await waitFor(page, () => { const s = globalThis.kvscope.state(); return s.errors.length ? s.errors : null; },
    null, 20000, 'the error panel');
  check('open view: a bad field shows in the error panel, naming the file and field',
    e.some((m) => m.includes('bad-view.json') && m.includes('fov_y')), e.join('; '));
  await command(page, { cmd: 'dismiss_errors' });
}

// F5 (presentation mode) takes the browser's fullscreen and gives it back;
// the page is not reloaded (the browser's F5).
async function presentationKey(page) {
  await page.focus('#canvas');
  await page.evaluate(() => { globalThis.kvscopeBeforeF5 = true; });
  // A key held for a few frames, as a hand does (a press and release inside one
  // slow SwiftShader frame would reach ImGui 1.86 as no press at all).
  const press = async (key) => { await page.keyboard.down(key); await sleep(300); await page.keyboard.up(key); };
  await press('F5');
  const on = await waitFor(page, () => { const s = globalThis.kvscope.state();
    return s.presentation && document.fullscreenElement ? 'on' : null; }, null, 10000, 'fullscreen').catch(() => 'no');
  const kept = await page.evaluate(() => globalThis.kvscopeBeforeF5 === true).catch(() => false);
  await press('F5');
  const off = await waitFor(page, () => { const s = globalThis.kvscope.state();
    return !s.presentation && !document.fullscreenElement ? 'off' : null; }, null, 10000, 'window').catch(() => 'no');
  check('F5: presentation mode in the browser\'s fullscreen and back, no reload', on === 'on' && off === 'off' && kept,
    `first F5 ${on}, second ${off}, page kept ${kept}`);
}

// A phone (390x844 CSS px, DPR 3, touch): a tap on the scene steps once, one
// finger dragging orbits, two fingers spreading zoom in (closer) and
// pinching zoom out; a mouse-wheel notch up zooms in one notch as on the desktop.
async function touch(browser, url, logs) {
  const { page } = await openPage(browser, url,
    { width: 390, height: 844, deviceScaleFactor: 3, isMobile: true, hasTouch: true }, logs);
  const cdp = await page.createCDPSession();
  const touchEv = (type, pts) => cdp.send('Input.dispatchTouchEvent',
    { type, touchPoints: pts.map(([x, y], id) => ({ x, y, id })) });
  await command(page, { cmd: 'pause' });
  await command(page, { cmd: 'toggle_panels' });  // the scene alone: a tap lands on it
  await waitFor(page, () => { const s = globalThis.kvscope.state(); return s.engine_idle && !s.playing; }, null,
    30000, 'idle');
  await sleep(500);
  const x = 195, y = 330;
  const before = await state(page);
  await touchEv('touchStart', [[x, y]]);
  await sleep(80);  // a finger's tap, not an instant
  await touchEv('touchEnd', []);
  await waitFor(page, (n) => globalThis.kvscope.state().steps > n && globalThis.kvscope.state().engine_idle,
    before.steps, 15000, 'the tap\'s step').catch(() => {});
  await sleep(600);
  const afterTap = await state(page);
  const taps = await page.evaluate(() => [globalThis.kvscopePage.tapsSeen, globalThis.kvscopePage.taps,
    globalThis.kvscopePage.lastTouch, globalThis.kvscopePage.tapRefused]);
  check('touch: a tap on the scene steps once', afterTap.steps === before.steps + 1,
    `steps ${before.steps} -> ${afterTap.steps} (taps seen ${taps[0]}, stepped ${taps[1]}, last: ${taps[2]}, refused: ${taps[3]})`);
  check('touch: the page marks a touch screen (state().touch), which drops the keys from the buttons\' labels',
    afterTap.touch === true, `state().touch ${afterTap.touch}`);
  await touchEv('touchStart', [[x - 80, y]]);
  for (let i = 1; i <= 8; i++) { await touchEv('touchMove', [[x - 80 + 20 * i, y]]); await sleep(30); }
  await touchEv('touchEnd', []);
  await sleep(300);
  const orbit = await state(page);
  check('touch: one finger dragging orbits the camera', Math.abs(orbit.camera_yaw - afterTap.camera_yaw) > 0.05 &&
    !orbit.auto_camera, `yaw ${afterTap.camera_yaw.toFixed(3)} -> ${orbit.camera_yaw.toFixed(3)}`);
  const pinch = async (from, to) => {
    await touchEv('touchStart', [[x - from, y], [x + from, y]]);
    for (let i = 1; i <= 6; i++) {
      const d = from + ((to - from) * i) / 6;
      await touchEv('touchMove', [[x - d, y], [x + d, y]]);
      await sleep(30);
    }
    await touchEv('touchEnd', []);
    await sleep(300);
    return (await state(page)).camera_distance;
  };
  const d0 = orbit.camera_distance, dOut = await pinch(40, 140), dIn = await pinch(140, 40);
  check('touch: spreading two fingers zooms in, pinching zooms out', dOut < d0 * 0.9 && dIn > dOut * 1.1,
    `distance ${d0.toFixed(2)} -> ${dOut.toFixed(2)} -> ${dIn.toFixed(2)}`);
  await page.mouse.move(x, y);
  await page.mouse.wheel({ deltaY: -100 });  // one notch up
  await sleep(300);
  const dWheel = (await state(page)).camera_distance;
  // (100 px of wheel = one desktop notch, 0.88 of the distance; browsers send 53-120 px a notch, and
  // emulated DPR scales puppeteer's pixels, so: closer, by at most a notch and a bit, not a jump)
  check('mouse wheel: up zooms in (closer, by about a notch, as on the desktop)',
    dWheel / dIn < 0.99 && dWheel / dIn > 0.8, `distance ${dIn.toFixed(3)} -> ${dWheel.toFixed(3)}`);
  await page.close();
}

// KV layout through window.kvscope (the Cache panel's layout): q8_0 rows, a
// window of 8 with 2 sinks, pages of 4; the page generates what
// `kvscope generate --kv-dtype q8_0 --kv-window 8 --kv-sinks 2 --kv-block 4`
// does, counter for counter; a bad dtype is refused with a message.
async function kvLayout(page) {
  const flags = ['--kv-dtype', 'q8_0', '--kv-window', '8', '--kv-sinks', '2', '--kv-block', '4'];
  const err = await command(page, { cmd: 'kv_layout', dtype: 'q8_0', window: 8, sinks: 2, block: 4 });
  const recs = await pageRecords(page);
  const ref = cliRecords(null, flags);
  const diffs = [];
  for (let i = 0; i < Math.min(recs.length, ref.length); i++)
    for (const k of COUNTERS)
      if (JSON.stringify(recs[i][k]) !== JSON.stringify(ref[i][k]))
        diffs.push(`step ${i} ${k}: page ${JSON.stringify(recs[i][k])} cli ${JSON.stringify(ref[i][k])}`);
  check('kv_layout command (q8_0, window 8 + 2 sinks, pages of 4): tokens and counters equal generate ' +
    flags.join(' '), !err && recs.length === ref.length && diffs.length === 0 &&
    ref.some((r) => r.evicted > 0), err || diffs.slice(0, 3).join('; ') || `${recs.length} vs ${ref.length} steps`);
  const bad = await command(page, { cmd: 'kv_layout', dtype: 'q3' });
  check('kv_layout: an unknown dtype is refused with a message naming the field', /kv_layout: "dtype" must be f32, f16, q8_0 or q4_0, got "q3"/.test(bad), bad);
  await command(page, { cmd: 'kv_layout', dtype: 'f32', window: 0, sinks: 0, block: 0 });
}

// Settings the page keeps in the browser (IndexedDB, as ~/.config/kvscope on the
// desktop): chosen in one visit, saved as the page is hidden, there in the next.
async function settingsPersist(browser, url, logs) {
  const vp = { width: 1280, height: 720, deviceScaleFactor: 1 };
  const first = await openPage(browser, url, vp, logs);
  let err = await command(first.page, { cmd: 'text_scale', scale: 1.75 });
  err ||= await command(first.page, { cmd: 'camera', preset: 'side' });
  const chosen = await state(first.page);
  const saved = await first.page.evaluate(() => globalThis.kvscopePage.saveSettings());
  await first.page.close();
  const second = await openPage(browser, url, vp, logs);
  const s = await state(second.page);
  check('settings persist in the browser: text scale and camera chosen in one visit are there in the next',
    !err && saved && chosen.text_scale === 1.75 && s.text_scale === 1.75 && s.camera === 'side',
    `command ${err || 'ok'}, saved ${saved}, next visit: text scale ${s.text_scale}, camera ${s.camera}`);
  // Back to the defaults, for whatever opens this origin next.
  await command(second.page, { cmd: 'text_scale', scale: 1 });
  await command(second.page, { cmd: 'camera', preset: 'front' });
  await second.page.evaluate(() => globalThis.kvscopePage.saveSettings());
  await second.page.close();
}

// `--only NAME`: one group of checks alone (while working on it).
// The page's products (16-row SIMD128 panels) and attention against double-precision loops:
// tests/web/linear_check.cpp and attend_check.cpp, built beside the site by `make web`, under node.
function linearCheck() {
  const js = path.join(path.dirname(SITE), 'kvscope_linear_check.js');
  let out, ok = true;
  try {
    out = execFileSync('node', ['--no-experimental-fetch', js], { encoding: 'utf8' });
  } catch (e) {
    ok = false;
    out = `${e.message} ${e.stdout || ''}`;
  }
  const lines = out.trim().split('\n');
  const line = (name) => lines.find((l) => l.startsWith(name + ':'));
  const passed = (name) => ok && / 0 failed/.test(line(name) || '');
  const detail = (name) => line(name) || lines.slice(-3).join(' | ');
  check('the page\'s products (SIMD128 panels) match a double-precision loop: F32, F16, BF16, f32 copies, ' +
    'partial panels, 1-17 positions, inf/NaN', passed('linear_check'), detail('linear_check'));
  check('the page\'s attention over an f32 cache (SIMD128) matches a double-precision loop and, bit for bit, ' +
    'the portable path: head widths 8-128, pages, 1-100 keys', passed('attend_check'), detail('attend_check'));
  check('the sampler\'s softmax in the page (its SIMD128 exp) matches a double-precision one: 1-50 257 logits, three ' +
    'temperatures, values whose exps flush to 0', passed('softmax_check'), detail('softmax_check'));
}

async function runOnly(name, c) {
  const page = async () => (await openPage(c.browser, c.coi.url, { width: 1280, height: 720, deviceScaleFactor: 1 },
    c.logs)).page;
  const groups = {
    linear: async () => linearCheck(),
    touch: () => touch(c.browser, c.coi.url, c.logs),
    hub: () => hubChecks(c.hubContext(c.plain.url)),
    training: () => trainingChecks(c.trainingContext),
    settings: () => settingsPersist(c.browser, c.coi.url, c.logs),
    speed: async () => speedChecks(c.speedContext(await page()), null, Number(args.rounds || 3)),
    models: async () => userModels(await page()),
    kv: async () => kvLayout(await page()),
    big: async () => bigModelChecks({ root: ROOT, dir: args['big-dir'], page: await page(), pickFolder, pageRecords,
      cliRecords, state, check, watchProgress, progressLines }),
  };
  if (!groups[name]) throw new Error(`--only ${name}: expected one of ${Object.keys(groups).join(', ')}`);
  await groups[name]();
  console.log(`web tests (${name} only): ${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

// Served with COOP/COEP: the records against the CLI's, NO CACHE mid-sequence, screenshots, the KV layout,
// saved views, presentation mode, an unknown command, the frame time.
// The chat view in the page: two turns whose cache counts and replies are those of
// `kvscope chat --json` for the same conversation, and a screenshot of it.
async function chatChecks(page) {
  const sys = 'You are a helpful assistant.', ask = ['What is the capital of France?', 'And of Spain?'];
  await command(page, { cmd: 'pause' });
  let err = await command(page, { cmd: 'chat_system', text: sys });
  err ||= await command(page, { cmd: 'chat_format', format: 'chatml' });
  err ||= await command(page, { cmd: 'chat_open' });
  await waitFor(page, () => globalThis.kvscope.state().chat.template !== '', null, 60000, 'the chat to open');
  for (let k = 0; k < ask.length && !err; k++) {
    err = await command(page, { cmd: 'chat_send', text: ask[k] });
    await waitFor(page, (n) => { const c = globalThis.kvscope.state().chat;
      return c.turns.length === n && c.turns[n - 1].done && !c.generating; }, k + 1, 120000, 'reply ' + (k + 1));
  }
  const s = await state(page);
  const out = execFileSync(CLI, ['chat', '--chat-format', 'chatml', '--json', '--max-new',
    String(s.choices.chat_max_new), '--system', sys], { input: ask.join('\n') + '\n', encoding: 'utf8',
    env: { ...process.env, KVSCOPE_THREADS: '1' } });
  const ev = out.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const cli = ev.filter((e) => e.event === 'turn').map((t, i) => ({ ...t,
    reply: ev.filter((e) => e.event === 'reply')[i] }));
  const page2 = s.chat.turns.map((t) => [t.reused, t.prefilled, t.computed, t.no_cache, t.reply]);
  const cli2 = cli.map((t) => [t.reused, t.prefilled, t.reply.computed, t.reply.no_cache, t.reply.text]);
  check('chat: two turns in the page reuse the cache as kvscope chat --json does (reused, prefilled, computed, ' +
    'NO CACHE, reply)', !err && JSON.stringify(page2) === JSON.stringify(cli2) && page2.length === 2 &&
    page2[1][0] > 0, `${err || ''} page ${JSON.stringify(page2).slice(0, 300)} cli ${JSON.stringify(cli2).slice(0, 300)}`);
  await new Promise((r) => setTimeout(r, 500));
  const png = await page.screenshot({ path: path.join(OUT, 'page-chat-1280x720.png') });
  const n = await colours(page, png);
  check('chat: the view is drawn (many colours)', n > 500, `${n} colours`);
  await command(page, { cmd: 'chat_open', open: false });
}

async function isolatedChecks(c) {
  const { browser, coi, logs, cliKv, cliNoCache, speedContext } = c;
  const { page, firstTokenS } = await openPage(browser, coi.url, { width: 1280, height: 720, deviceScaleFactor: 1 },
    logs);
  check('coi: page is cross-origin isolated', await page.evaluate(() => self.crossOriginIsolated === true));
  console.log(`info time from page open to the first generated token: ${firstTokenS.toFixed(2)} s`);
  const recs = await pageRecords(page);
  compareRecords('coi', recs, cliKv);
  await speedChecks(speedContext(page), recs);
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
  await kvLayout(page);
  await savedViews(page, dl);
  await presentationKey(page);
  const bad = await command(page, { cmd: 'no_such_command' });
  check('an unknown command is refused with a message', /unknown cmd/.test(bad), bad);
  // Bad values reach the page's API as JSON (NaN as null): each is named, with the range, and nothing changes.
  const nan = await command(page, { cmd: 'max_new', n: NaN });
  const cliBad = await page.evaluate(() => globalThis.kvscope.cli(['generate', 1]));
  const cliRender = await page.evaluate(() => globalThis.kvscope.cli(['render', '--prompt', 'a', '--out', 'a.png']));
  check('a bad command field or cli() argument is named, with what was expected; render is refused as usage',
    /max_new: "n" must be a whole number in 1\.\.\d+, got null/.test(nan) && cliBad.rc === 2 &&
    /kvscope\.cli: element 1 is 1, not a string/.test(cliBad.errors.join(' ')) && cliRender.rc === 2 &&
    /render draws with the desktop's OpenGL/.test(cliRender.errors.join(' ')),
    `${nan} | ${cliBad.errors} | ${cliRender.rc} ${cliRender.errors}`);
  // Frame time while generating.
  const ft = await page.evaluate(() => { const t = [...globalThis.kvscopePage.frameTimes].slice(-120).sort((a, b) => a - b);
    return t.length ? t[Math.floor(t.length / 2)] : 0; });
  console.log(`info median frame time (last 120 frames): ${ft.toFixed(1)} ms`);
  await chatChecks(page);
  await page.close();

}

async function main() {
  const cliKv = cliRecords(null), cliNoCache = cliRecords(null, ['--no-cache']);
  const coi = await serve(true), plain = await serve(false);
  const browser = await launch();
  const logs = [];
  const hubContext = (url) => ({ root: ROOT, browser, url, logs, openPage, state, command, pageRecords, cliRecords,
    check, waitFor });
  const trainingContext = { root: ROOT, site: SITE, cli: CLI, browser, url: coi.url, logs, openPage, state, command,
    pageRecords, cliRecords, check, waitFor };
  const speedContext = (page) => ({ root: ROOT, cli: CLI, nodeCli: args['node-cli'], page, command, check });
  const c = { browser, coi, plain, logs, cliKv, cliNoCache, hubContext, trainingContext, speedContext };
  try {
    if (args.only) {
      await runOnly(args.only, c);
      return;
    }
    linearCheck();
    await isolatedChecks(c);
    await touch(browser, coi.url, logs);
    await trainingChecks(trainingContext);
    if (args.shots) await viewportShots(browser, coi.url, logs);
    // Served without the headers: the service worker adds them and reloads once.
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
    // Models by Hugging Face id, on the host without headers (the service worker between page and hub).
    await hubChecks(hubContext(plain.url));
    await settingsPersist(browser, coi.url, logs);
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
