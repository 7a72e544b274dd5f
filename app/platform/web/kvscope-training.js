// The default model's training checkpoints (the Training tab), kept out of the
// first download: after the page's first generated token (or at once when a
// page asks for the Training tab) the files listed in training-files.json
// (cmake/web.cmake) are fetched and written into the app's file system beside
// the model, where the desktop reads them
// (/assets/models/kvscope-tiny-training/{step-*/,training.json}); then the app
// reads the record again. Progress shows in the Training tab; a failed fetch
// goes to the error panel, naming the file.
'use strict';
(() => {
  const page = globalThis.kvscopePage;
  const kManifest = 'training-files.json';
  const progress = (t) => Module.ccall('kvscope_training_progress', null, ['string'], [t]);
  const get = async (url) => {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`HTTP ${r.status} ${r.statusText}`);
    return r;
  };

  async function fetchAll() {
    let what = kManifest;
    try {
      const list = await (await get(kManifest)).json();
      const total = list.files.reduce((n, f) => n + f.size, 0);
      let done = 0;
      // Four at a time: `what` names the first that fails, not the last started.
      const one = async (f) => {
        const rel = list.root + '/' + f.path;
        let bytes;
        try {
          bytes = new Uint8Array(await (await get(rel)).arrayBuffer());
          if (bytes.length !== f.size) throw new Error(`${bytes.length} bytes arrived, ${f.size} expected`);
        } catch (e) {
          what = rel;
          throw e;
        }
        FS.mkdirTree('/' + rel.slice(0, rel.lastIndexOf('/')));
        FS.writeFile('/' + rel, bytes);
        done += f.size;
        progress(`Fetching the training checkpoints: ${page.mb(done)} of ${page.mb(total)}`);
      };
      progress(`Fetching the training checkpoints: 0 KiB of ${page.mb(total)}`);
      // The record (training.json, listed last) is written only once every
      // checkpoint it names is there.
      const record = list.files[list.files.length - 1];
      const rest = list.files.slice(0, -1);
      for (let i = 0; i < rest.length; i += 4) await Promise.all(rest.slice(i, i + 4).map(one));
      await one(record);
      Module.ccall('kvscope_training_fetched', null, [], []);
      page.trainingFetch = 'done';
    } catch (e) {
      page.trainingFetch = 'failed';
      progress('Fetching the training checkpoints failed (see the error panel).');
      Module.ccall('kvscope_report_error', null, ['string'],
        [`Training checkpoints: fetching ${what} failed: ${e.message}`]);
    }
  }
  page.fetchTraining = () => {
    if (!page.isReady) return null;
    if (!page.trainingFetchPromise) {
      page.trainingFetch = 'fetching';
      page.trainingFetchPromise = fetchAll();
    }
    return page.trainingFetchPromise;
  };

  // Opening the Training tab through window.kvscope fetches at once.
  const command = globalThis.kvscope.command;
  globalThis.kvscope.command = (obj) => {
    const r = command(obj);
    if (!r && obj && obj.cmd === 'tab' && obj.name === 'training') page.fetchTraining();
    return r;
  };
  // Otherwise in the background once the first token is on screen.
  const poll = setInterval(() => {
    if (page.trainingFetchPromise) return clearInterval(poll);
    const s = globalThis.kvscope.state();
    if (s && s.steps > 0) {
      clearInterval(poll);
      page.fetchTraining();
    }
  }, 500);
})();
