// check.cjs loads a GGUF file and a Hugging Face tokenizer in Hugging
// Face's JavaScript libraries (@huggingface/gguf, @huggingface/tokenizers)
// and prints, as JSON, what they read: the GGUF's metadata (token lists cut
// to their length and first entries) and tensors, and the ids the
// tokenizer gives each text with its decoding, and each rendered chat.
//
// Usage: node check.cjs MODULES < request.json, where MODULES is the
// node_modules directory scripts/setup-exportcheck.sh installs and the
// request is {"gguf": FILE, "hf": DIR, "texts": [...], "rendered": [...]}
// (either file may be left out). The export tests (model/llama) run it.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const modules = process.argv[2];
const need = (name) => require(path.join(modules, name));

async function main() {
	const req = JSON.parse(fs.readFileSync(0, "utf8"));
	const out = {};
	if (req.gguf) {
		const { gguf } = need("@huggingface/gguf");
		const { metadata, tensorInfos } = await gguf(path.resolve(req.gguf), { allowLocalFile: true });
		const meta = {};
		for (const [k, v] of Object.entries(metadata)) {
			if (Array.isArray(v)) {
				meta[k] = { length: v.length, head: v.slice(0, 4), at256: v.slice(256, 258) };
			} else {
				meta[k] = v;
			}
		}
		out.metadata = meta;
		out.tensors = tensorInfos.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype }));
	}
	if (req.hf) {
		const { Tokenizer } = need("@huggingface/tokenizers");
		const read = (name) => JSON.parse(fs.readFileSync(path.join(req.hf, name), "utf8"));
		const tok = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
		out.ids = (req.texts || []).map((t) => Array.from(tok.encode(t).ids, Number));
		out.decoded = out.ids.map((ids) => tok.decode(ids, { skip_special_tokens: true }));
		// A rendered chat holds its special tokens as text and is encoded
		// without adding any, as apply_chat_template does.
		out.rendered = (req.rendered || []).map((t) => Array.from(tok.encode(t, { add_special_tokens: false }).ids, Number));
	}
	process.stdout.write(JSON.stringify(out, (_, v) => (typeof v === "bigint" ? Number(v) : v)));
}

main().catch((err) => {
	process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
	process.exit(1);
});
