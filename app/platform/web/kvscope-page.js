// kvscope's page: starts the WebAssembly app (kvscope.js) once the page is
// cross-origin isolated, copies a dropped or picked model folder into the
// app's in-memory file system, hands PNG downloads to the browser, and
// exposes window.kvscope for tests and course pages:
//   kvscope.state()      the shown step as a `kvscope generate --json` record
//                        + prompt, generated (ids), text, errors, ...
//   kvscope.command(obj) {cmd: 'prompt', text} | {cmd: 'step'} | {cmd: 'cache', mode: 'no_cache'} | ...
//                        returns '' when accepted, else the error (docs/web.md)
'use strict';
(() => {
  const statusEl = document.getElementById('status');
  const setStatus = (t) => { statusEl.textContent = t; };
  // WebAssembly memory is at most 4 GB; model files plus the app's copy of the
  // weights must fit, so a folder above this is refused before it is read.
  const kMaxModelBytes = 1536 * 1024 * 1024;
  const page = {
    isReady: false, frames: 0, fatalError: '', openedAt: performance.now(), readyAt: 0,
    frameTimes: [], lastFrame: 0, loadError: '', folders: 0,
  };
  globalThis.kvscopePage = page;

  page.fatal = (msg) => { page.fatalError = msg; setStatus('kvscope cannot run here: ' + msg); };
  page.started = () => { page.isReady = true; page.readyAt = performance.now(); setStatus(''); };
  page.frame = () => {
    const now = performance.now();
    if (page.lastFrame) {
      page.frameTimes.push(now - page.lastFrame);
      if (page.frameTimes.length > 600) page.frameTimes.shift();
    }
    page.lastFrame = now;
    page.frames++;
  };
  page.download = (path, mime) => {
    const data = FS.readFile(path);
    const url = URL.createObjectURL(new Blob([data], { type: mime }));
    const a = document.createElement('a');
    a.href = url;
    a.download = path.split('/').pop();
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 2000);
    FS.unlink(path);
  };

  // ---- a model folder into the in-memory file system: /models/<n>/<folder>/... ----
  function mkdirs(path) {
    let cur = '';
    for (const d of path.split('/').slice(1, -1)) {
      cur += '/' + d;
      try { FS.mkdir(cur); } catch (e) { /* exists */ }
    }
  }
  async function loadFiles(files) {  // files: [[relative path, File]]
    if (!page.isReady) return 'kvscope is still starting';
    page.loadError = '';
    if (files.length === 0) return (page.loadError = 'the folder is empty');
    const total = files.reduce((n, [, f]) => n + f.size, 0);
    if (total > kMaxModelBytes) {
      page.loadError = `this model folder holds ${(total / 2 ** 20).toFixed(0)} MB; the browser's WebAssembly ` +
        `memory allows models up to ${(kMaxModelBytes / 2 ** 20).toFixed(0)} MB (use the desktop app for larger ones)`;
      setStatus(page.loadError);
      setTimeout(() => setStatus(''), 8000);
      return page.loadError;
    }
    const root = '/models/' + (++page.folders);
    const top = files[0][0].includes('/') ? files[0][0].split('/')[0] : '';
    for (const [rel, f] of files) {
      const path = root + '/' + rel;
      mkdirs(path);
      FS.writeFile(path, new Uint8Array(await f.arrayBuffer()));
    }
    Module.ccall('kvscope_load_folder', null, ['string'], [top ? root + '/' + top : root]);
    return '';
  }
  page.loadFiles = loadFiles;
  const picker = document.getElementById('picker');
  document.getElementById('open').addEventListener('click', () => picker.click());
  picker.addEventListener('change', async () => {
    await loadFiles([...picker.files].map((f) => [f.webkitRelativePath || f.name, f]));
    picker.value = '';
  });
  async function walkEntry(entry, prefix, out) {
    if (entry.isFile) {
      out.push([prefix + entry.name, await new Promise((res, rej) => entry.file(res, rej))]);
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {  // readEntries gives at most 100 at a time
        const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walkEntry(e, prefix + entry.name + '/', out);
      }
    }
  }
  const drop = document.getElementById('drop');
  window.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.style.display = 'flex'; });
  window.addEventListener('dragleave', () => { drop.style.display = 'none'; });
  window.addEventListener('drop', async (ev) => {
    ev.preventDefault();
    drop.style.display = 'none';
    // Entries are taken before any await: the browser empties the list after it.
    const entries = [...ev.dataTransfer.items].map((it) => it.webkitGetAsEntry()).filter(Boolean);
    const files = [];
    for (const e of entries) await walkEntry(e, '', files);
    await loadFiles(files);
  });

  // ---- window.kvscope ----
  globalThis.kvscope = {
    state: () => (page.isReady ? JSON.parse(Module.ccall('kvscope_state_json', 'string', [], [])) : null),
    command: (obj) => (page.isReady
      ? Module.ccall('kvscope_command_json', 'string', ['string'], [JSON.stringify(obj)])
      : 'kvscope is still starting'),
    page,
  };

  // ---- start the app once the page is cross-origin isolated ----
  globalThis.Module = {
    canvas: document.getElementById('canvas'),
    print: (t) => console.log(t),
    printErr: (t) => console.warn(t),
    setStatus: (t) => { if (!page.isReady && t) setStatus('loading kvscope… ' + t.replace(/\(.*\)/, '')); },
    onAbort: (what) => page.fatal(String(what)),
    // Settings (the desktop's ~/.config/kvscope) live in IndexedDB: read before
    // main, written when the page is hidden or closed.
    preRun: [() => {
      const dir = '/home/web_user/.config';
      FS.mkdirTree(dir);
      FS.mount(IDBFS, {}, dir);
      addRunDependency('kvscope-settings');
      FS.syncfs(true, () => removeRunDependency('kvscope-settings'));
    }],
  };
  const saveSettings = () => {
    if (!page.isReady) return;
    Module.ccall('kvscope_save_settings', null, [], []);
    FS.syncfs(false, () => {});
  };
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'hidden') saveSettings(); });
  window.addEventListener('pagehide', saveSettings);
  page.saveSettings = saveSettings;

  // Touch: GLFW maps one finger to the mouse (tap = click, drag = orbit); two
  // fingers pinching become the mouse wheel (zoom).
  let pinch = 0;
  const canvas = document.getElementById('canvas');
  const spread = (t) => Math.hypot(t[0].clientX - t[1].clientX, t[0].clientY - t[1].clientY);
  canvas.addEventListener('touchmove', (ev) => {
    if (ev.touches.length !== 2) { pinch = 0; return; }
    const d = spread(ev.touches);
    if (pinch) canvas.dispatchEvent(new WheelEvent('wheel', { deltaY: (pinch - d) * 2, deltaMode: 0,
      clientX: (ev.touches[0].clientX + ev.touches[1].clientX) / 2, clientY: (ev.touches[0].clientY + ev.touches[1].clientY) / 2 }));
    pinch = d;
    ev.preventDefault();
  }, { passive: false });
  canvas.addEventListener('touchend', () => { pinch = 0; });
  if (self.crossOriginIsolated) {
    const s = document.createElement('script');
    s.src = 'kvscope.js';
    document.body.appendChild(s);
  } else if (!('serviceWorker' in navigator) || !window.isSecureContext) {
    page.fatal('the page is not cross-origin isolated and cannot install its service worker ' +
      '(open it over https:// or http://localhost, or serve it with the COOP/COEP headers: make serve)');
  } else {
    setStatus('loading kvscope… (installing the page\'s service worker)');
  }
})();
