// Drives an OpenAI-compatible server with the official `openai` client
// (npm package openai): an independent implementation of the API's client
// side for the Go tests of hacrl serve.
//
// Usage: node openai.js request.json
// request.json: {"baseURL": "http://127.0.0.1:PORT/v1", "apiKey": "...",
//                "calls": [{"kind": "completions"|"chat"|"models",
//                           "params": {...}, "apiKey"?: "..."}]}
// stdout:       [{"result": {...}} or {"chunks": [{...}]} (when params.stream)
//                or {"error": {"status": N, "message", "type", "param", "code"}}]
// A call's apiKey, when given, replaces the request's (to test refusals).
// The client retries nothing (maxRetries 0), so an error is the server's
// first answer.
"use strict";
const fs = require("fs");
const { OpenAI, APIError } = require("openai");

const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

const client = (apiKey) =>
  new OpenAI({ baseURL: request.baseURL, apiKey: apiKey || "none", maxRetries: 0, timeout: 60000 });

async function call(c) {
  const api = client(c.apiKey !== undefined ? c.apiKey : request.apiKey);
  try {
    let res;
    switch (c.kind) {
      case "completions":
        res = await api.completions.create(c.params);
        break;
      case "chat":
        res = await api.chat.completions.create(c.params);
        break;
      case "models":
        res = await api.models.list();
        return { result: { data: res.data } };
      default:
        throw new Error(`unknown kind ${c.kind}`);
    }
    if (c.params && c.params.stream) {
      const chunks = [];
      for await (const chunk of res) chunks.push(chunk);
      return { chunks };
    }
    return { result: res };
  } catch (e) {
    if (e instanceof APIError) {
      return { error: { status: e.status ?? null, message: e.message, type: e.type ?? null, param: e.param ?? null, code: e.code ?? null } };
    }
    return { error: { status: null, message: String(e && e.message || e) } };
  }
}

(async () => {
  const out = [];
  for (const c of request.calls) out.push(await call(c));
  process.stdout.write(JSON.stringify(out));
})();
