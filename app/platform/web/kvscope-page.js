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
  const kCopySlice = 32 * 1024 * 1024;  // a model file is read into the page this much at a time
  const page = {
    isReady: false, frames: 0, fatalError: '', openedAt: performance.now(), readyAt: 0,
    frameTimes: [], lastFrame: 0, loadError: '', folders: 0, maxModelBytes: kMaxModelBytes, setStatus,
  };
  globalThis.kvscopePage = page;

  // A line and a bar over the top of the view while files come into the page
  // (a folder copied, a model downloaded from the hub); '' hides it.
  page.progress = '';
  page.showProgress = (text, frac) => {
    page.progress = text;
    document.getElementById('hub-progress').textContent = text;
    document.getElementById('hub-status').hidden = !text;
    const bar = document.getElementById('hub-bar');
    bar.hidden = frac === null || !text;
    if (frac !== null) bar.value = frac;
  };
  // Sizes in binary units, as the app's panels print them (format_bytes).
  page.mb = (n) => (n < 2 ** 20 ? (n / 2 ** 10).toFixed(0) + ' KiB'
    : (n / 2 ** 20).toFixed(n < 10 * 2 ** 20 ? 1 : 0) + ' MiB');

  page.fatal = (msg) => { page.fatalError = msg; setStatus('kvscope cannot run here: ' + msg); };
  // A touch screen: the app's buttons then leave out their keyboard keys.
  const touchSeen = () => { if (page.isReady) Module.ccall('kvscope_touch_seen', null, [], []); };
  page.started = () => {
    page.isReady = true;
    page.readyAt = performance.now();
    setStatus('');
    if (matchMedia('(hover: none) and (pointer: coarse)').matches) touchSeen();
  };
  window.addEventListener('touchstart', touchSeen, { capture: true, passive: true });
  page.frame = (presentation) => {
    followPresentation(presentation);
    const now = performance.now();
    if (page.lastFrame) {
      page.frameTimes.push(now - page.lastFrame);
      if (page.frameTimes.length > 600) page.frameTimes.shift();
    }
    page.lastFrame = now;
    page.frames++;
  };
  // Presentation mode (F5, the View panel) takes the browser's fullscreen and
  // gives it back; leaving fullscreen with the browser's own key (Esc) leaves
  // presentation mode too. Changes only: the user may still exit either alone.
  let shownPresentation = false, fullscreenForPresentation = false;
  function followPresentation(on) {
    if (on === shownPresentation) return;
    shownPresentation = on;
    const el = document.documentElement;
    if (on && !document.fullscreenElement && el.requestFullscreen) {
      el.requestFullscreen().then(() => { fullscreenForPresentation = true; }, () => {});
    } else if (!on && document.fullscreenElement && fullscreenForPresentation) {
      fullscreenForPresentation = false;
      document.exitFullscreen().catch(() => {});
    }
  }
  document.addEventListener('fullscreenchange', () => {
    if (document.fullscreenElement || !fullscreenForPresentation) return;
    fullscreenForPresentation = false;
    if (shownPresentation) globalThis.kvscope.command({ cmd: 'presentation' });
  });
  // The app's keys that the browser would take: F5 (reload) is presentation
  // mode, F11 the app's fullscreen button. The app still sees the key.
  window.addEventListener('keydown', (ev) => {
    if (ev.key === 'F5' || ev.key === 'F11') ev.preventDefault();
  }, true);

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
  // files: [[relative path, File or Blob]] (a picked or dropped folder, or a
  // model fetched by id: kvscope-hub.js)
  async function loadFiles(files) {
    if (!page.isReady) return 'kvscope is still starting';
    page.loadError = '';
    if (files.length === 0) return (page.loadError = 'the folder is empty');
    const total = files.reduce((n, [, f]) => n + f.size, 0);
    if (total > kMaxModelBytes) {
      page.loadError = `this model folder holds ${page.mb(total)}; the browser's WebAssembly ` +
        `memory allows models up to ${page.mb(kMaxModelBytes)} (use the desktop app for larger ones)`;
      setStatus(page.loadError);
      setTimeout(() => setStatus(''), 8000);
      return page.loadError;
    }
    const root = '/models/' + (++page.folders);
    const top = files[0][0].includes('/') ? files[0][0].split('/')[0] : '';
    const name = top || 'the model';
    let done = 0;
    const shown = (n) => page.showProgress(`Copying ${name} into the page: ${page.mb(n)} of ${page.mb(total)}`,
      total ? n / total : 0);
    try {
      for (const [rel, f] of files) {
        const path = root + '/' + rel;
        mkdirs(path);
        // In slices, so that the line moves through a single 700 MB file.
        const bytes = new Uint8Array(f.size);
        for (let at = 0; at < f.size; at += kCopySlice) {
          shown(done + at);
          const end = Math.min(f.size, at + kCopySlice);
          bytes.set(new Uint8Array(await f.slice(at, end).arrayBuffer()), at);
        }
        // canOwn: the file system keeps this buffer rather than a copy (a 700 MB model is held once).
        FS.writeFile(path, bytes, { canOwn: true });
        done += f.size;
      }
    } catch (e) {  // a file changed or removed since it was picked, or no memory for it
      page.loadError = `${name}: its files could not be copied into the page (${e.message || e})`;
      Module.ccall('kvscope_report_error', null, ['string'], [page.loadError]);
      return page.loadError;
    } finally {
      page.showProgress('', null);
    }
    Module.ccall('kvscope_load_folder', null, ['string'], [top ? root + '/' + top : root]);
    return '';
  }
  page.loadFiles = loadFiles;
  const picker = document.getElementById('picker');
  page.openModel = () => picker.click();  // the app's Open model buttons (app/platform/user_files.h)
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

  // ---- saved views: "Open view..." asks for a file, which goes through the same
  // reader and checks as on the desktop (errors in the error panel) ----
  const viewPicker = document.getElementById('view-picker');
  page.openView = () => viewPicker.click();
  viewPicker.addEventListener('change', async () => {
    const f = viewPicker.files[0];
    viewPicker.value = '';
    if (!f) return;
    FS.mkdirTree('/tmp/views');
    const path = '/tmp/views/' + f.name.replace(/[^\w.\- ]/g, '_');
    FS.writeFile(path, new Uint8Array(await f.arrayBuffer()));
    globalThis.kvscope.command({ cmd: 'load_view', path });
  });

  // ---- window.kvscope ----
  globalThis.kvscope = {
    state: () => (page.isReady ? JSON.parse(Module.ccall('kvscope_state_json', 'string', [], [])) : null),
    command: (obj) => (page.isReady
      ? Module.ccall('kvscope_command_json', 'string', ['string'], [JSON.stringify(obj)])
      : 'kvscope is still starting'),
    // `kvscope ...args` in the page (e.g. ['generate', '--json', ...]): {rc, lines, errors} (stdout, stderr)
    cli: (args) => {
      page.printSink = [];
      page.errSink = [];
      try {
        const rc = Module.ccall('kvscope_cli', 'number', ['string'], [JSON.stringify(args)]);
        return { rc, lines: page.printSink, errors: page.errSink };
      } finally {
        page.printSink = null;
        page.errSink = null;
      }
    },
    page,
  };

  // ---- start the app once the page is cross-origin isolated ----
  globalThis.Module = {
    canvas: document.getElementById('canvas'),
    print: (t) => (page.printSink ? page.printSink.push(t) : console.log(t)),
    printErr: (t) => (page.errSink ? page.errSink.push(t) : console.warn(t)),
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
  // Resolves once IndexedDB holds the file (true), or false when there was nothing to save or it failed.
  const saveSettings = () => new Promise((resolve) => {
    if (!page.isReady) return resolve(false);
    Module.ccall('kvscope_save_settings', null, [], []);
    FS.syncfs(false, (err) => resolve(!err));
  });
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'hidden') saveSettings(); });
  window.addEventListener('pagehide', saveSettings);
  page.saveSettings = saveSettings;

  // Wheel: Emscripten's GLFW hands the browser's deltaY (pixels, down > 0) to
  // the app as is; the desktop's GLFW gives notches, up > 0. Normalised here,
  // before GLFW's own listener, so a notch zooms and scrolls as on the desktop.
  const kLinePx = 16, kPagePx = 800, kNotchPx = 100;
  window.addEventListener('wheel', (ev) => {
    if (ev.kvscopeNotches) return;
    const px = (d) => d * (ev.deltaMode === 1 ? kLinePx : ev.deltaMode === 2 ? kPagePx : 1);
    Object.defineProperty(ev, 'deltaX', { value: -px(ev.deltaX) / kNotchPx });
    Object.defineProperty(ev, 'deltaY', { value: -px(ev.deltaY) / kNotchPx });
    ev.kvscopeNotches = true;
  }, { capture: true, passive: false });

  // Touch. Emscripten's GLFW does not read a touch's position, so touches are
  // turned into the mouse events it does read: one finger is the left button
  // (drag = orbit, tap = click), two fingers pinching are the wheel (zoom),
  // and a short still tap on the scene is one step.
  const canvas = document.getElementById('canvas');
  const mouse = (type, t) => canvas.dispatchEvent(new MouseEvent(type, { bubbles: true, cancelable: true,
    clientX: t.clientX, clientY: t.clientY, button: 0, buttons: type === 'mouseup' ? 0 : 1 }));
  const spread = (t) => Math.hypot(t[0].clientX - t[1].clientX, t[0].clientY - t[1].clientY);
  let finger = null, pinch = 0, tap = null;
  // On the window, capturing: before GLFW's own touch listeners, which would
  // press the button at a stale position (stopped here).
  const onCanvas = (type, fn) => window.addEventListener(type, (ev) => {
    page.lastTouch = `${type} on ${ev.target.id || ev.target.nodeName}, ${ev.touches.length} down, t ${ev.timeStamp | 0}`;
    if (ev.target !== canvas) return;
    ev.stopPropagation();
    ev.preventDefault();  // no emulated mouse events after ours
    fn(ev);
  }, { capture: true, passive: false });
  onCanvas('touchstart', (ev) => {
    if (ev.touches.length === 1) {
      finger = ev.touches[0];
      mouse('mousemove', finger);
      mouse('mousedown', finger);
      tap = { x: finger.clientX, y: finger.clientY, at: ev.timeStamp };
    } else {
      if (finger) mouse('mouseup', finger);  // a second finger: the drag ends, the pinch starts
      finger = null;
      tap = null;
      pinch = spread(ev.touches);
    }
  });
  onCanvas('touchmove', (ev) => {
    if (ev.touches.length === 1 && finger) {
      finger = ev.touches[0];
      mouse('mousemove', finger);
      if (tap && Math.hypot(finger.clientX - tap.x, finger.clientY - tap.y) > 10) tap = null;
    } else if (ev.touches.length === 2) {
      const d = spread(ev.touches);
      const mid = { clientX: (ev.touches[0].clientX + ev.touches[1].clientX) / 2,
        clientY: (ev.touches[0].clientY + ev.touches[1].clientY) / 2 };
      mouse('mousemove', mid);
      // Fingers apart (d grows) = wheel up = zoom in; 100 px of spread = one notch.
      if (pinch) canvas.dispatchEvent(new WheelEvent('wheel', { bubbles: true, cancelable: true, deltaMode: 0,
        deltaY: (pinch - d), clientX: mid.clientX, clientY: mid.clientY }));
      pinch = d;
    }
  });
  const touchEnd = (ev) => {
    if (ev.touches.length > 0) return;
    if (finger) mouse('mouseup', finger);
    finger = null;
    pinch = 0;
    const was = tap;
    tap = null;
    // (event times, not handling times: a busy frame may delay the handlers;
    // a press held a second is not a tap)
    if (!was || ev.timeStamp - was.at > 1000 || !page.isReady) {
      page.tapRefused = was ? `held ${(ev.timeStamp - was.at) | 0} ms` : 'moved, or no start seen';
      return;
    }
    // After ImGui has seen the click (next frames): a step, unless on a panel.
    page.tapsSeen = (page.tapsSeen || 0) + 1;
    requestAnimationFrame(() => requestAnimationFrame(() => {
      page.taps = (page.taps || 0) + Module.ccall('kvscope_tap', 'number', [], []);
    }));
  };
  onCanvas('touchend', touchEnd);
  onCanvas('touchcancel', touchEnd);
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
