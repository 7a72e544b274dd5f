#!/usr/bin/env node
// Reference GPT-2 token ids from the JS encoder of the npm package
// gpt-3-encoder@1.1.4 (fetched by scripts/fetch-test-data.sh).
//
// Usage: node tools/tokenizer_ref.js PACKAGE_DIR INPUT.json [--mode=stock|fixed|split]
//   INPUT.json: a JSON list of strings. Prints a JSON list, one entry per string.
//   --mode=stock (default): ids from the package's encode(), untouched.
//   --mode=fixed: ids from the package's own Encoder.js source with its two
//       known deviations from OpenAI's encoder.py patched (see below); used
//       for the inputs where the stock encoder is wrong.
//   --mode=split: the pre-tokens of the fixed pattern (a list of strings per input).
//
// The two deviations of gpt-3-encoder 1.1.4 from GPT-2's encoder.py:
//   1. Whitespace. Its pattern runs on JavaScript's RegExp, whose \s is not
//      the \s of Python's `regex` module used by GPT-2 (Unicode White_Space):
//      JS adds U+FEFF and lacks U+0085. "fixed" spells \s out as White_Space.
//   2. Merge ranks keyed by array -> string. bpe_ranks[pair] converts the pair
//      [a, b] to the string "a,b", so pairs whose parts contain commas collide
//      (e.g. ['",', '"'] finds the rank of the merge ['"', ',"']) and the
//      encoder then merges pairs that GPT-2 never merges. "fixed" gives merge
//      pairs and candidate pairs a toString() that joins with a space, which no
//      vocab entry contains (space is 'Ġ' in the unicode form), as merges.txt does.
//      GPT-2's merges have 11 such colliding pairs (e.g. ['",', '"'] vs the merge
//      ['"', ',"']), but no input was found where the stock ids change: all
//      1.4M strings of 2-7 chars over ,"')]}.[ (with and without a leading
//      space) give the same ids in both modes. So this one is latent.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

function die(msg) {
  process.stderr.write(`tokenizer_ref.js: ${msg}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let mode = 'stock';
const positional = [];
for (const a of args) {
  if (a.startsWith('--mode=')) mode = a.slice('--mode='.length);
  else positional.push(a);
}
if (positional.length !== 2 || !['stock', 'fixed', 'split'].includes(mode)) {
  die('usage: node tools/tokenizer_ref.js PACKAGE_DIR INPUT.json [--mode=stock|fixed|split]');
}
const [pkgDir, inputPath] = positional;
const encoderPath = path.resolve(pkgDir, 'Encoder.js');
if (!fs.existsSync(encoderPath)) die(`${encoderPath} not found (run scripts/fetch-test-data.sh)`);

let inputs;
try {
  inputs = JSON.parse(fs.readFileSync(inputPath, 'utf-8'));
} catch (e) {
  die(`${inputPath}: ${e.message}`);
}
if (!Array.isArray(inputs) || !inputs.every((s) => typeof s === 'string')) {
  die(`${inputPath}: expected a JSON list of strings`);
}

// White_Space (Unicode 6.3+), i.e. \s of Python's `regex` module.
const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

function loadFixed() {
  let src = fs.readFileSync(encoderPath, 'utf-8');
  const patch = (from, to) => {
    if (!src.includes(from)) die(`Encoder.js: expected to find ${JSON.stringify(from)} (not gpt-3-encoder 1.1.4?)`);
    src = src.split(from).join(to);
  };
  // 1. \s as White_Space.
  patch(
    "const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+/gu",
    `const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+/gu`);
  // 2. Pair keys joined with a space instead of a comma.
  patch('pairs.add([prev_char, char])', 'pairs.add(spacePair([prev_char, char]))');
  patch('const bpe_ranks = dictZip(bpe_merges,', 'const bpe_ranks = dictZip(bpe_merges.map(spacePair),');
  src = 'const spacePair = (p) => { p.toString = function () { return this.join(" ") }; return p };\n' +
        src + '\nmodule.exports.pat = pat;\n';
  const mod = { exports: {} };
  vm.runInThisContext(`(function (exports, require, module, __filename, __dirname) {${src}\n})`, {
    filename: encoderPath,
  })(mod.exports, require, mod, encoderPath, path.dirname(encoderPath));
  return mod.exports;
}

let out;
if (mode === 'stock') {
  const { encode } = require(encoderPath);
  out = inputs.map((s) => encode(s));
} else {
  const fixed = loadFixed();
  out = mode === 'fixed' ? inputs.map((s) => fixed.encode(s))
                         : inputs.map((s) => Array.from(s.matchAll(fixed.pat), (m) => m[0]));
}
process.stdout.write(JSON.stringify(out) + '\n');
