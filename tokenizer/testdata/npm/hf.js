// Encodes texts with @lenml/tokenizers and renders chat templates with
// @huggingface/jinja: implementations independent of package tokenizer.
//
// Usage: node hf.js request.json
// request.json: {"encode": [{"dir": "models dir", "texts": ["..."]}],
//                "render": [{"config": "tokenizer_config.json", "contexts": [{...}]}],
//                "apply": [{"dir": "models dir", "contexts": [{...}]}]}
// stdout:       {"encode": [{"ids": [[...]], "decoded": ["..."]}],
//                "render": [{"outputs": ["..." or null], "errors": [null or "..."]}],
//                "apply": [{"texts": ["..."], "ids": [[...]]}]}
// "apply" is apply_chat_template(tokenize=True): render, then encode without
// adding special tokens.
// Encoding adds no special tokens; decoding skips special tokens. A render
// context gets bos_token and eos_token from the config, as
// apply_chat_template passes them.
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");
const { Template } = require("@huggingface/jinja");

const readJSON = (p) => JSON.parse(fs.readFileSync(p, "utf8"));
const request = readJSON(process.argv[2]);

const loadTokenizer = (dir) =>
  TokenizerLoader.fromPreTrained({
    tokenizerJSON: readJSON(path.join(dir, "tokenizer.json")),
    tokenizerConfig: readJSON(path.join(dir, "tokenizer_config.json")),
  });

const encode = (request.encode || []).map((c) => {
  const tok = loadTokenizer(c.dir);
  const ids = c.texts.map((text) => Array.from(tok.encode(text, { add_special_tokens: false })));
  // hacrl decodes losslessly: no clean-up of spaces before punctuation, which
  // Llama 3's tokenizer_config.json asks for (clean_up_tokenization_spaces).
  const decoded = ids.map((x) => tok.decode(x, { skip_special_tokens: true, clean_up_tokenization_spaces: false }));
  return { ids, decoded };
});

const special = (v) => (v && typeof v === "object" ? v.content : v);

const chatTemplate = (cfg) => {
  let source = cfg.chat_template;
  if (Array.isArray(source)) source = source.find((t) => t.name === "default").template;
  const tpl = new Template(source);
  return (ctx) => {
    const full = { ...ctx };
    for (const name of ["bos_token", "eos_token"]) {
      const v = special(cfg[name]);
      if (v !== undefined && v !== null) full[name] = v;
    }
    return tpl.render(full);
  };
};

const render = (request.render || []).map((c) => {
  const apply = chatTemplate(readJSON(c.config));
  const outputs = [];
  const errors = [];
  for (const ctx of c.contexts) {
    try {
      outputs.push(apply(ctx));
      errors.push(null);
    } catch (e) {
      outputs.push(null);
      errors.push(String(e && e.message ? e.message : e));
    }
  }
  return { outputs, errors };
});

const apply = (request.apply || []).map((c) => {
  const tok = loadTokenizer(c.dir);
  const renderOne = chatTemplate(readJSON(path.join(c.dir, "tokenizer_config.json")));
  const texts = c.contexts.map(renderOne);
  const ids = texts.map((text) => Array.from(tok.encode(text, { add_special_tokens: false })));
  return { texts, ids };
});

process.stdout.write(JSON.stringify({ encode, render, apply }));
