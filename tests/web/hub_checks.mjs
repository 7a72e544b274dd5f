// Models by Hugging Face id in the page (app/platform/web/kvscope-hub.js),
// against a local stand-in for the hub: random checkpoints (tools/numpy_ref*.py)
// served under the hub's layout, BASE/{org}/{name}/resolve/main/{file}, from
// another origin (CORS, as huggingface.co). Nothing here reaches the internet.
//   a sharded random Llama typed into the page's id field loads, shows its
//   download progress, and generates what the native CLI generates for the folder;
//   a second visit loads it from the browser's storage (the server sees no request
//   for the weights); a single-file GPT-2 by kvscope.loadHub; an unknown id, a
//   repository without weights, one missing a shard its index names and one too
//   big for the page's memory (the last two refused before any weight is
//   downloaded) reach the error panel naming the id and the file.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

// The stand-in hub. repos: {'org/name': {dir, heads: {file: reported size}}}; every request is logged.
function hubServer(repos) {
  const log = [];
  const srv = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    res.setHeader('Access-Control-Allow-Origin', '*');
    const m = /^\/([\w.-]+\/[\w.-]+)\/resolve\/main\/([\w.-]+)$/.exec(req.url);
    const repo = m && repos[m[1]];
    if (repo && req.method === 'HEAD' && repo.heads && m[2] in repo.heads) {
      res.writeHead(200, { 'Content-Length': repo.heads[m[2]] });
      res.end();
      return;
    }
    const file = repo && path.join(repo.dir, m[2]);
    if (!file || !fs.existsSync(file)) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end(req.method === 'HEAD' ? undefined : 'Entry not found');
      return;
    }
    const data = fs.readFileSync(file);
    res.writeHead(200, { 'Content-Length': data.length, 'Content-Type': 'application/octet-stream' });
    res.end(req.method === 'HEAD' ? undefined : data);
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1',
    () => resolve({ srv, log, base: `http://127.0.0.1:${srv.address().port}` })));
}

function makeRepos(root) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvscope-hub-'));
  const llama = path.join(dir, 'random-llama'), gpt2 = path.join(dir, 'random-gpt2');
  const noWeights = path.join(dir, 'no-weights');
  execFileSync('/usr/bin/python3', [path.join(root, 'tools/numpy_ref_llama.py'), 'make', '--out', llama, '--seed', '7',
    '--shards', '2']);
  execFileSync('/usr/bin/python3', [path.join(root, 'tools/numpy_ref.py'), 'make', '--out', gpt2, '--layers', '2',
    '--heads', '2', '--embd', '32', '--ctx', '64', '--seed', '9']);
  const missingShard = path.join(dir, 'missing-shard');
  fs.cpSync(llama, missingShard, { recursive: true });
  fs.rmSync(path.join(missingShard, 'model-00002-of-00002.safetensors'));
  fs.mkdirSync(noWeights);
  for (const f of ['config.json', 'vocab.json', 'merges.txt']) {
    fs.copyFileSync(path.join(gpt2, f), path.join(noWeights, f));
  }
  return {
    llama, gpt2,
    repos: {
      'test-org/random-llama': { dir: llama },
      'test-org/random-gpt2': { dir: gpt2 },
      'test-org/no-weights': { dir: noWeights },
      'test-org/missing-shard': { dir: missingShard },
      // 3 GB by the sizes reported (HEAD); a GET would send the small real file.
      'test-org/too-big': { dir: gpt2, heads: { 'model.safetensors': 3 * 2 ** 30 } },
    },
  };
}

export async function hubChecks(t) {
  const { openPage, state, command, pageRecords, cliRecords, check, waitFor } = t;
  const m = makeRepos(t.root);
  const hub = await hubServer(m.repos);
  const url = `${t.url}?hub=${encodeURIComponent(hub.base)}`;
  const vp = { width: 1280, height: 720, deviceScaleFactor: 1 };
  const tokens = (recs) => JSON.stringify(recs.map((r) => r.token));
  const loaded = (page, name) => waitFor(page, (name) => { const s = globalThis.kvscope.state();
    return !globalThis.kvscopePage.hub.busy && !s.loading &&
      (s.model_dir.endsWith('/' + name) || s.errors.length > 0) ? s : null; }, name, 60000, 'loading ' + name);
  const weightGets = (from) => hub.log.slice(from).filter((l) => /^GET .*\.safetensors$/.test(l));
  try {
    // 1. typed into the page's field, the progress line watched
    const { page } = await openPage(t.browser, url, vp, t.logs);
    await page.evaluate(() => {
      globalThis.kvscopeHubLines = [];
      new MutationObserver(() => globalThis.kvscopeHubLines.push(document.getElementById('hub-progress').textContent))
        .observe(document.getElementById('hub-progress'), { childList: true, characterData: true, subtree: true });
    });
    await command(page, { cmd: 'pause' });
    await page.evaluate(() => globalThis.kvscopePage.showHub());  // what the Generation panel's button calls
    await page.type('#hub-id', 'test-org/random-llama');
    await page.click('#hub-load');
    await waitFor(page, () => globalThis.kvscopePage.hub.busy || globalThis.kvscope.state().loading, null, 10000,
      'the fetch to start').catch(() => {});
    let s = await loaded(page, 'random-llama');
    const gets = weightGets(0);
    check('hub id: a sharded random Llama typed into the page\'s field is fetched (both shards) and loads',
      s.errors.length === 0 && s.model_error === '' && gets.length === 2 &&
      gets.every((l) => l.includes('/test-org/random-llama/resolve/main/model-0000')),
      `errors ${s.errors.join('; ')} ${s.model_error}; weight requests: ${gets.join(', ')}`);
    const lines = await page.evaluate(() => globalThis.kvscopeHubLines);
    check('hub id: the download shows its progress (file, bytes of total)',
      lines.some((l) => /^Downloading test-org\/random-llama: model-00002-of-00002\.safetensors .* of /.test(l)),
      lines.filter(Boolean).slice(0, 3).join(' | '));
    const recs = await pageRecords(page);
    const ref = cliRecords(m.llama);
    check('hub id: the random Llama by id generates what the CLI generates for its folder',
      tokens(recs) === tokens(ref), `page ${tokens(recs)} cli ${tokens(ref)}`);
    await page.close();

    // 2. a second visit: from the browser's storage
    const before = hub.log.length;
    const p2 = (await openPage(t.browser, url, vp, t.logs)).page;
    const err = await p2.evaluate(() => globalThis.kvscope.loadHub('test-org/random-llama'));
    s = await loaded(p2, 'random-llama');
    const cached = await p2.evaluate(() => globalThis.kvscopePage.hub.fromCache);
    const again = hub.log.slice(before).filter((l) => l.includes('/test-org/'));
    check('hub id: a second visit loads from the browser\'s storage, no request to the hub for its files',
      !err && cached && s.model_dir.endsWith('/random-llama') && s.errors.length === 0 && again.length === 0,
      `${err} from cache ${cached}; requests: ${again.join(', ')}`);

    // 3. a single-file GPT-2 by kvscope.loadHub
    const err2 = await p2.evaluate(() => globalThis.kvscope.loadHub('test-org/random-gpt2'));
    s = await loaded(p2, 'random-gpt2');
    const recs2 = await pageRecords(p2);
    const ref2 = cliRecords(m.gpt2);
    check('hub id: a single-file random GPT-2 (vocab.json + merges.txt) loads and generates what the CLI generates',
      !err2 && s.errors.length === 0 && tokens(recs2) === tokens(ref2),
      `${err2} page ${tokens(recs2)} cli ${tokens(ref2)}`);

    // 4. errors: in the error panel, naming the id and the file
    const errorOf = async (id) => {
      await command(p2, { cmd: 'dismiss_errors' });
      const from = hub.log.length;
      const ret = await p2.evaluate((id) => globalThis.kvscope.loadHub(id), id);
      const e = await waitFor(p2, () => { const s = globalThis.kvscope.state();
        return s.errors.length ? s.errors : null; }, null, 20000, 'the error panel').catch(() => []);
      return { ret, errors: e.join('; '), requests: hub.log.slice(from) };
    };
    let e = await errorOf('test-org/no-such-model');
    check('hub id: an unknown id (404) shows an error naming the id',
      /test-org\/no-such-model: no such model/.test(e.errors), e.errors || e.ret);
    e = await errorOf('test-org/no-weights');
    check('hub id: a repository without weights shows an error naming the id and model.safetensors',
      /test-org\/no-weights: model\.safetensors is missing/.test(e.errors), e.errors || e.ret);
    e = await errorOf('test-org/missing-shard');
    check('hub id: a shard named in the index but missing on the hub: an error naming the id and the shard',
      /test-org\/missing-shard: model-00002-of-00002\.safetensors \(a shard named in/.test(e.errors) &&
      !e.requests.some((l) => l.startsWith('GET') && l.endsWith('.safetensors')),
      `${e.errors || e.ret}; requests: ${e.requests.filter((l) => l.endsWith('.safetensors')).join(', ')}`);
    e = await errorOf('test-org/too-big');
    const bigGets = e.requests.filter((l) => l.startsWith('GET') && l.endsWith('.safetensors'));
    check('hub id: a model too big for the page is refused before downloading, by the sizes the hub reports',
      /test-org\/too-big: .*3072 MiB.*model\.safetensors 3072 MiB.*nothing was downloaded/.test(e.errors) &&
      bigGets.length === 0, `${e.errors || e.ret}; weight requests: ${bigGets.join(', ')}`);
    await command(p2, { cmd: 'dismiss_errors' });
    await p2.close();
  } finally {
    hub.srv.close();
  }
}
