// The Training tab in the page: the default model's checkpoints are not in the
// first download (kvscope.data); the page fetches them (kvscope-training.js)
// and the tab lists the checkpoints of assets/models/kvscope-tiny-training, a
// checkpoint's validation loss computed in the page from its weights
// (`kvscope eval` through kvscope.cli) equals the native CLI's and the one
// training.json records, a checkpoint loads and generates what the CLI
// generates with it, and a failed fetch reaches the error panel naming the file.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const TOL = 0.01;  // nats/token, as tests/test_default_model.cpp's ValidationLossFalls... check

export async function trainingChecks(ctx) {
  const { root, browser, url, logs, openPage, state, command, pageRecords, cliRecords, check, waitFor, cli, site } = ctx;
  const dir = path.join(root, 'assets/models/kvscope-tiny-training');
  const record = JSON.parse(fs.readFileSync(path.join(dir, 'training.json'), 'utf8'));
  // The steps as the folder holds them: step-NNNNN folders, then the final model.
  const folderSteps = fs.readdirSync(dir).filter((d) => /^step-\d+$/.test(d)).map((d) => Number(d.slice(5)))
    .sort((a, b) => a - b).concat([record.total_steps]);

  // 1. A fetch that fails: one checkpoint's weights answer 404.
  const failing = 'kvscope-tiny-training/step-00100/model.safetensors';
  const { page: bad } = await openPage(browser, url, { width: 1280, height: 720, deviceScaleFactor: 1 }, logs,
    async (p) => {
      await p.setRequestInterception(true);
      p.on('request', (r) => (r.url().endsWith(failing)
        ? r.respond({ status: 404, contentType: 'text/plain', body: 'not here' }) : r.continue()));
    });
  await command(bad, { cmd: 'tab', name: 'training' });
  const sb = await waitFor(bad, () => { const s = globalThis.kvscope.state();
    return globalThis.kvscopePage.trainingFetch === 'failed' ? s : null; }, null, 60000, 'the failed fetch');
  check('training: a failed checkpoint fetch shows in the error panel naming the file',
    sb.training === null && sb.errors.some((e) => e.includes(failing) && /404/.test(e)), sb.errors.join('; '));
  // The first download's file list (Emscripten's preload metadata in kvscope.js) names the model, not its run.
  const loader = fs.readFileSync(path.join(site, 'kvscope.js'), 'utf8');
  check('training: the checkpoints are not in the first download (kvscope.data), but are in the site',
    loader.includes('/assets/models/kvscope-tiny/model.safetensors') && !loader.includes('kvscope-tiny-training') &&
    fs.existsSync(path.join(site, 'assets/models/kvscope-tiny-training/training.json')));
  await bad.close();

  // 2. The fetch that works.
  const { page } = await openPage(browser, url, { width: 1280, height: 720, deviceScaleFactor: 1 }, logs);
  const err = await command(page, { cmd: 'tab', name: 'training' });
  const seen = await waitFor(page, () => { const s = globalThis.kvscope.state();
    return s.training || s.training_fetch ? { fetch: s.training_fetch, done: !!s.training } : null; },
  null, 60000, 'the Training tab to fetch or list');
  const s = await waitFor(page, () => { const s = globalThis.kvscope.state(); return s.training ? s : null; }, null,
    120000, 'the training checkpoints');
  check('training: the Training tab shows the fetch progress, then the record',
    !err && (seen.done || /Fetching the training checkpoints: .* of .* MiB/.test(seen.fetch)) &&
    s.training.tab_open && s.training_fetch === '', err || JSON.stringify(seen));
  const pageSteps = s.training.checkpoints.map((c) => c.step);
  check('training: the page lists the checkpoints of assets/models/kvscope-tiny-training',
    JSON.stringify(pageSteps) === JSON.stringify(folderSteps),
    `page ${JSON.stringify(pageSteps)} folder ${JSON.stringify(folderSteps)}`);

  // 3. One checkpoint's validation loss, computed in the page from its weights.
  const i = pageSteps.indexOf(300) >= 0 ? pageSteps.indexOf(300) : 1;
  const cp = s.training.checkpoints[i];
  const valFile = 'assets/models/kvscope-tiny/val/stories.txt';
  const inPage = await page.evaluate((a) => globalThis.kvscope.cli(a),
    ['eval', '--json', '--model', cp.path, '--file', '/' + valFile]);
  const pageEval = JSON.parse(inPage.lines.find((l) => l.startsWith('{')) || '{}');
  const native = JSON.parse(execFileSync(cli, ['eval', '--json', '--model', path.join(dir, path.basename(cp.path)),
    '--file', path.join(root, valFile)], { encoding: 'utf8' }));
  const recorded = record.checkpoints.find((c) => c.step === cp.step).val_loss.stories;
  const near = (a, b) => Number.isFinite(a) && Math.abs(a - b) <= TOL;
  check(`training: step ${cp.step}'s validation loss in the page equals the native CLI's and training.json's ` +
    `(±${TOL})`, inPage.rc === 0 && near(pageEval.nll_per_token, native.nll_per_token) &&
    near(pageEval.nll_per_token, recorded) && near(cp.val_loss.stories, pageEval.nll_per_token),
  `page ${pageEval.nll_per_token} native ${native.nll_per_token} training.json ${recorded} ` +
    `tab ${cp.val_loss.stories} (rc ${inPage.rc}${inPage.errors.length ? ': ' + inPage.errors.join(' ') : ''})`);

  // 4. Loading that checkpoint from the tab: its weights generate what the CLI generates with them.
  await command(page, { cmd: 'load_checkpoint', index: i });
  const loaded = await waitFor(page, (i) => { const t = globalThis.kvscope.state();
    return !t.loading && t.training && t.training.shown === i ? t : null; }, i, 60000, 'the checkpoint to load');
  const recs = await pageRecords(page);
  const ref = cliRecords(path.join(dir, path.basename(cp.path)));
  check(`training: checkpoint step ${cp.step} loads from the tab and generates what the CLI generates with it`,
    loaded.model_dir.endsWith(path.basename(cp.path)) &&
    JSON.stringify(recs.map((r) => r.token)) === JSON.stringify(ref.map((r) => r.token)),
    `${loaded.model_dir}: page ${JSON.stringify(recs.map((r) => r.token))} cli ${JSON.stringify(ref.map((r) => r.token))}`);
  await page.close();
}
