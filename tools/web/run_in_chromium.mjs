// Runs an Emscripten program (a main, no window: tools/web/kernel_bench.cpp)
// in headless Chromium, the V8 the page runs on (node's is older and slower
// on SIMD128), served cross-origin isolated so performance.now() is fine
// grained, and prints what it prints.
// Usage: node tools/web/run_in_chromium.mjs DIR/PROGRAM.js [ARGS...]
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const puppeteer = createRequire(path.join(HERE, 'package.json'))('puppeteer-core');
const TIMEOUT_MS = 300000;

const [program, ...args] = process.argv.slice(2);
if (!program || !program.endsWith('.js') || !fs.existsSync(program)) {
  console.error('usage: node tools/web/run_in_chromium.mjs DIR/PROGRAM.js [ARGS...] (an em++ output .js)');
  process.exit(2);
}
const dir = path.dirname(path.resolve(program));
const isolated = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };
const page = `<script>var Module = {arguments: ${JSON.stringify(args)}, print: (t) => console.log(t),
  printErr: (t) => console.log(t), onExit: (c) => console.log('__exit ' + c)};</script>
<script src="${path.basename(program)}"></script>`;
const server = http.createServer((req, res) => {
  const name = decodeURIComponent(req.url.split('?')[0]);
  if (name === '/') return res.writeHead(200, { ...isolated, 'content-type': 'text/html' }).end(page);
  const file = path.join(dir, path.normalize(name));
  if (!file.startsWith(dir) || !fs.existsSync(file)) return res.writeHead(404).end();
  const type = file.endsWith('.wasm') ? 'application/wasm' : 'text/javascript';
  res.writeHead(200, { ...isolated, 'cross-origin-resource-policy': 'same-origin', 'content-type': type })
    .end(fs.readFileSync(file));
}).listen(0, '127.0.0.1');

const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
let code = 1;
try {
  const tab = await browser.newPage();
  const exited = new Promise((resolve) => tab.on('console', (m) => {
    const t = m.text();
    if (t.startsWith('__exit ')) resolve(Number(t.slice(7)));
    else if (m.type() !== 'error' || !t.includes('404')) console.log(t);  // (no favicon)
  }));
  await tab.goto(`http://127.0.0.1:${server.address().port}/`);
  code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), TIMEOUT_MS))]);
  if (code === 'timeout') {
    console.error(`${program} did not exit within ${TIMEOUT_MS / 1000} s`);
    code = 1;
  }
} finally {
  await browser.close();
  server.close();
}
process.exit(code);
