// A model by its Hugging Face id in the page: config.json, the tokenizer files
// and the safetensors (one file, or shards + model.safetensors.index.json) are
// fetched from the hub, kept in the browser's storage (Cache API) for the next
// visit, and handed to the same folder loader as a picked folder
// (kvscopePage.loadFiles in kvscope-page.js: the C++ loaders and their checks).
// The hub is https://huggingface.co unless the page's URL says ?hub=BASE or
// window.kvscopeOptions = {hub: BASE} is set first (tests serve a checkpoint
// under the hub's layout, BASE/{org}/{name}/resolve/main/{file}).
//   kvscope.loadHub(id, {hub})  resolves to '' when the folder was handed over, else the error
'use strict';
(() => {
  const page = globalThis.kvscopePage;
  const kCacheName = 'kvscope-hub-v1';
  // Read if the repository has them; tokenizer.json or vocab.json + merges.txt is needed.
  const kTokenizerFiles = ['tokenizer.json', 'vocab.json', 'merges.txt', 'tokenizer_config.json',
    'special_tokens_map.json', 'generation_config.json'];
  const kManifest = '.kvscope-files.json';  // the cached list of a model's files: a complete copy
  class HubError extends Error {}
  const hub = { busy: false, lastError: '', fromCache: false, networkFiles: [], progress: '' };
  page.hub = hub;

  const hubBase = (opt) => String((opt && opt.hub) || new URLSearchParams(location.search).get('hub') ||
    (globalThis.kvscopeOptions && globalThis.kvscopeOptions.hub) || 'https://huggingface.co').replace(/\/+$/, '');
  const mb = page.mb;
  // The size the hub reports (X-Linked-Size on its redirect, else Content-Length); null if none.
  const sizeOf = (r) => {
    const h = r.headers.get('x-linked-size') || r.headers.get('content-length');
    return h !== null && /^\d+$/.test(h) ? Number(h) : null;
  };

  function showProgress(text, frac) {
    hub.progress = text;
    page.showProgress(text, frac);
  }

  // One request to the hub; a network failure (offline, no CORS headers) is an error naming the file.
  async function request(id, url, file, method) {
    try {
      const r = await fetch(url, { method, mode: 'cors', credentials: 'omit', cache: 'no-store' });
      if (method === 'GET') hub.networkFiles.push(file);
      return r;
    } catch (e) {
      throw new HubError(`${id}: ${file}: the hub at ${url} cannot be reached (${e.message})`);
    }
  }
  const httpError = (id, file, r) => new HubError(`${id}: ${file}: the hub answered HTTP ${r.status} ` +
    `${r.statusText} (${r.url})`);

  // What the repository holds: [{name, size, blob?}]; the small JSON files are read on the way.
  async function discover(id, url) {
    const cfg = await request(id, url('config.json'), 'config.json', 'GET');
    if (cfg.status === 404 || cfg.status === 401) {
      throw new HubError(`${id}: no such model on the hub (config.json: HTTP ${cfg.status} from ${cfg.url}; ` +
        'private or gated models cannot be fetched here; ids look like HuggingFaceTB/SmolLM2-135M)');
    }
    if (!cfg.ok) throw httpError(id, 'config.json', cfg);
    const cfgBlob = await cfg.blob();
    const files = [{ name: 'config.json', size: cfgBlob.size, blob: cfgBlob }];
    const single = await request(id, url('model.safetensors'), 'model.safetensors', 'HEAD');
    if (single.ok) {
      files.push({ name: 'model.safetensors', size: sizeOf(single) });
    } else if (single.status === 404) {
      const ix = await request(id, url('model.safetensors.index.json'), 'model.safetensors.index.json', 'GET');
      if (ix.status === 404) {
        throw new HubError(`${id}: model.safetensors is missing on the hub, and so is model.safetensors.index.json ` +
          '(expected the weights as safetensors: one file, or shards + index)');
      }
      if (!ix.ok) throw httpError(id, 'model.safetensors.index.json', ix);
      const ixBlob = await ix.blob();
      let shards;
      try {
        shards = [...new Set(Object.values(JSON.parse(await ixBlob.text()).weight_map))];
      } catch (e) {
        throw new HubError(`${id}: model.safetensors.index.json: expected {"weight_map": {tensor: shard file}} ` +
          `(${e.message})`);
      }
      files.push({ name: 'model.safetensors.index.json', size: ixBlob.size, blob: ixBlob });
      for (const s of shards) {
        if (typeof s !== 'string' || !/^[\w.-]+$/.test(s)) {
          throw new HubError(`${id}: model.safetensors.index.json names the shard ${JSON.stringify(s)}, ` +
            'expected a file name');
        }
        const r = await request(id, url(s), s, 'HEAD');
        if (r.status === 404) {
          throw new HubError(`${id}: ${s} (a shard named in model.safetensors.index.json) is missing on the hub`);
        }
        if (!r.ok) throw httpError(id, s, r);
        files.push({ name: s, size: sizeOf(r) });
      }
    } else {
      throw httpError(id, 'model.safetensors', single);
    }
    for (const f of kTokenizerFiles) {
      const r = await request(id, url(f), f, 'HEAD');
      if (r.ok) files.push({ name: f, size: sizeOf(r) });
      else if (r.status !== 404) throw httpError(id, f, r);
    }
    const has = (n) => files.some((f) => f.name === n);
    if (!has('tokenizer.json') && !(has('vocab.json') && has('merges.txt'))) {
      throw new HubError(`${id}: tokenizer.json is missing on the hub, and so is vocab.json + merges.txt ` +
        '(expected one of the two tokenizer forms)');
    }
    return files;
  }

  function refuseTooBig(id, files) {
    const total = files.reduce((n, f) => n + (f.size || 0), 0);
    if (total <= page.maxModelBytes) return;
    const biggest = [...files].sort((a, b) => (b.size || 0) - (a.size || 0)).slice(0, 3)
      .map((f) => `${f.name} ${mb(f.size || 0)}`).join(', ');
    throw new HubError(`${id}: the model's files hold ${mb(total)} by the sizes the hub reports (${biggest}); the ` +
      `page's WebAssembly memory allows models up to ${mb(page.maxModelBytes)}: nothing was downloaded ` +
      `(the desktop app opens it: kvscope --model ${id})`);
  }

  // GET with a progress line; a file whose size was not reported is checked by its Content-Length first.
  async function download(id, url, f, done, total) {
    const r = await request(id, url(f.name), f.name, 'GET');
    if (r.status === 404) throw new HubError(`${id}: ${f.name} is missing on the hub (${r.url})`);
    if (!r.ok) throw httpError(id, f.name, r);
    const size = sizeOf(r);
    if (f.size === null && size !== null && done + size > page.maxModelBytes) {
      refuseTooBig(id, [{ name: f.name, size: done + size }]);
    }
    const chunks = [];
    let got = 0;
    const reader = r.body.getReader();
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) break;
      chunks.push(value);
      got += value.length;
      showProgress(`Downloading ${id}: ${f.name} ${mb(got)}${size ? ' of ' + mb(size) : ''} ` +
        `(all files: ${mb(done + got)} of ${mb(total)})`, total ? Math.min(1, (done + got) / total) : null);
    }
    return new Blob(chunks);
  }

  // A complete earlier copy from the browser's storage, or null.
  async function fromCache(cache, id, url) {
    if (!cache) return null;
    const m = await cache.match(url(kManifest));
    if (!m) return null;
    const files = [];
    for (const name of (await m.json()).files) {
      const r = await cache.match(url(name));
      if (!r) return null;
      files.push({ name, blob: await r.blob() });
    }
    return files;
  }

  async function store(cache, url, files) {
    if (!cache) return;
    try {
      for (const f of files) await cache.put(url(f.name), new Response(f.blob));
      await cache.put(url(kManifest), new Response(JSON.stringify({ files: files.map((f) => f.name) })));
    } catch (e) {  // storage full or refused: this visit still loads the model
      console.warn(`kvscope: the model was not kept in the browser's storage (${e.message})`);
    }
  }

  async function fetchModel(id, base) {
    const url = (file) => `${base}/${id}/resolve/main/${file}`;
    const cache = globalThis.caches ? await caches.open(kCacheName).catch(() => null) : null;
    let files = await fromCache(cache, id, url);
    hub.fromCache = files !== null;
    if (!files) {
      showProgress(`Asking the hub about ${id}…`, null);
      files = await discover(id, url);
      refuseTooBig(id, files);
      const total = files.reduce((n, f) => n + (f.size || 0), 0);
      let done = 0;
      for (const f of files) {
        if (!f.blob) f.blob = await download(id, url, f, done, total);
        done += f.blob.size;
      }
      await store(cache, url, files);
    }
    return files;
  }

  function report(msg) {
    hub.lastError = msg;
    page.loadError = msg;
    try {
      if (page.isReady) Module.ccall('kvscope_report_error', null, ['string'], [msg]);
    } catch (e) {
      console.error(`kvscope: ${msg} (${e.message})`);
    }
  }

  async function loadHub(id, opt) {
    id = String(id || '').trim();
    if (!page.isReady) return 'kvscope is still starting';
    if (hub.busy) return 'a model is being fetched already';
    hub.lastError = '';
    hub.networkFiles = [];
    if (!/^[A-Za-z0-9][\w.-]*(\/[\w.-]+)?$/.test(id) || id.includes('..')) {
      const msg = `"${id}" is not a Hugging Face model id (expected ORG/NAME, e.g. HuggingFaceTB/SmolLM2-135M)`;
      report(msg);
      return msg;
    }
    hub.busy = true;
    try {
      const files = await fetchModel(id, hubBase(opt));
      showProgress(`Loading ${id}${hub.fromCache ? " from the browser's storage" : ''}…`, null);
      const name = id.split('/').pop();
      const err = await page.loadFiles(files.map((f) => [`${name}/${f.name}`, f.blob]));
      if (err) report(`${id}: ${err}`);
      return err ? `${id}: ${err}` : '';
    } catch (e) {
      const msg = e instanceof HubError ? e.message : `${id}: ${e.message}`;
      report(msg);
      return msg;
    } finally {
      hub.busy = false;
      showProgress('', null);
    }
  }
  globalThis.kvscope.loadHub = loadHub;

  // The field, shown by the app's From the hub button (app/platform/user_files.h).
  const form = document.getElementById('hub');
  const hideHub = () => form.classList.remove('shown');
  page.showHub = () => {
    form.classList.add('shown');
    document.getElementById('hub-id').focus();
  };
  document.getElementById('hub-cancel').addEventListener('click', hideHub);
  form.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') hideHub();
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    hideHub();  // the progress line takes its place
    loadHub(document.getElementById('hub-id').value);
  });
})();
