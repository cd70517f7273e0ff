#!/usr/bin/env node
// A recording ACP agent on the official TypeScript SDK (unstable v1 entrypoint),
// for the differential suite.
//
//   node diff_agent.mjs RECORD_FILE
//
// Every handler the SDK calls (typed handlers for the session methods, plus "*"
// fallbacks for any other request or notification, as a vendor agent that
// accepts future methods would have) appends one JSON line to RECORD_FILE,
// synchronously, before doing anything else:
//   {"sdk": "ts", "method": ..., "sessionId": params.sessionId, "case": params._meta.case}
// session/new answers PARENT. A session/prompt on PARENT with text "announce"
// first announces CHILD (no capabilities) and GRANTED ({cancel: {}, prompt: {}});
// "barrier" waits 100 ms so that everything received before it is dispatched.
import fs from "node:fs";
import { Readable, Writable } from "node:stream";
import { loadSdk } from "./sdk.mjs";

const RECORD = process.argv[2];
const { agent, methods, ndJsonStream, PROTOCOL_VERSION } = await loadSdk("/unstable");

function record(method, params) {
  const p = params !== null && typeof params === "object" ? params : {};
  const meta = p._meta !== null && typeof p._meta === "object" ? p._meta : {};
  const line = { sdk: "ts", method: String(method), sessionId: p.sessionId ?? null, case: meta.case ?? null };
  fs.appendFileSync(RECORD, JSON.stringify(line) + "\n");
}

const s = methods.agent.session;
const answers = {
  [s.setMode]: () => ({}),
  [s.setConfigOption]: () => ({ configOptions: [] }),
  [s.close]: () => ({}),
  [s.load]: () => ({}),
  [s.resume]: () => ({}),
  [s.fork]: () => ({ sessionId: "FORK" }),
  [s.delete]: () => ({}),
  [s.setTitle]: () => ({}),
  [s.archive]: () => ({}),
  [s.unarchive]: () => ({}),
};

const announce = (client, sessionId, capabilities) =>
  client.notify(methods.client.session.update, {
    sessionId: "PARENT",
    update: {
      sessionUpdate: "subagent_update",
      sessionId,
      title: sessionId.toLowerCase(),
      ...(capabilities ? { capabilities } : {}),
    },
  });

let app = agent({ name: "acp-proxy-ts-diff-agent" })
  .onRequest(methods.agent.initialize, ({ params }) => ({
    protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
    agentCapabilities: { loadSession: true },
    agentInfo: { name: "acp-proxy-ts-diff-agent", version: "0.1.0" },
    authMethods: [],
  }))
  .onRequest(s.new, () => ({ sessionId: "PARENT" }))
  .onRequest(s.prompt, async ({ params, client }) => {
    record(s.prompt, params);
    const text = params.prompt.map((b) => b.text ?? "").join(" ");
    if (params.sessionId === "PARENT" && text === "announce") {
      await announce(client, "CHILD", null);
      await announce(client, "GRANTED", { cancel: {}, prompt: {} });
    }
    if (text === "barrier") await new Promise((resolve) => setTimeout(resolve, 100));
    return { stopReason: "end_turn" };
  })
  .onNotification(s.cancel, ({ params }) => record(s.cancel, params));
for (const [method, answer] of Object.entries(answers)) {
  app = app.onRequest(method, ({ params }) => (record(method, params), answer()));
}
app = app
  .onRequest("*", ({ method, params }) => (record(method, params), {}))
  .onNotification("*", ({ method, params }) => record(method, params));

const conn = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
process.exit(0);
