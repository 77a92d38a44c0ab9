// Encodes and decodes texts with @huggingface/tokenizers (tokenizers.js), an
// implementation of tokenizer.json independent of package tokenizer.
//
// Usage: node check.js request.json
// request.json: {"cases": [{"tokenizer": "path/tokenizer.json", "texts": ["..."]}]}
// stdout:       {"results": [{"ids": [[...], ...], "decoded": ["...", ...]}]}
// Encoding adds no special tokens; decoding skips special tokens.
"use strict";
const fs = require("fs");
const { Tokenizer } = require("@huggingface/tokenizers");

const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const results = request.cases.map((c) => {
  const json = JSON.parse(fs.readFileSync(c.tokenizer, "utf8"));
  const tok = new Tokenizer(json, { clean_up_tokenization_spaces: false });
  const ids = c.texts.map((text) => tok.encode(text, { add_special_tokens: false }).ids);
  const decoded = ids.map((x) => (x.length === 0 ? "" : tok.decode(x, { skip_special_tokens: true })));
  return { ids, decoded };
});
process.stdout.write(JSON.stringify({ results }));
