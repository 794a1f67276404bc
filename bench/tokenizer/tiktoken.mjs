// Encode throughput of OpenAI's tiktoken (cl100k_base, WASM build) on a text
// file, for comparison with turnwise's Llama 3 tokenizer.
//
// usage: node tiktoken.mjs TEXT_FILE [RUNS]
// Prints: "<median MB/s> <tokens>".
import { readFileSync } from "node:fs";
import { get_encoding } from "tiktoken";

const [file, runsArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node tiktoken.mjs TEXT_FILE [RUNS]");
  process.exit(2);
}
const runs = Number(runsArg ?? 5);
const text = readFileSync(file, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const enc = get_encoding("cl100k_base");

let tokens = enc.encode_ordinary(text).length; // warm-up
const rates = [];
for (let i = 0; i < runs; i++) {
  const t0 = process.hrtime.bigint();
  tokens = enc.encode_ordinary(text).length;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  rates.push(bytes / 1e6 / secs);
}
enc.free();
rates.sort((a, b) => a - b);
console.log(`${rates[Math.floor(rates.length / 2)].toFixed(2)} ${tokens}`);
