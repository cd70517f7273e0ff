#!/usr/bin/env node
// ACP client on the official TypeScript SDK's WebSocket transport
// (@agentclientprotocol/sdk/experimental/ws-client): one scripted turn.
//
// usage: node ts_ws_client.mjs SDK_DIR URL [hang]
//   SDK_DIR: a directory whose node_modules holds @agentclientprotocol/sdk and zod
//   hang: after session/new, prompt "hang" and report how that request ended
//   ({code, message} of its error) instead of the scripted turn
//   admission: session/new with a stdio MCP server; report its error ({code,
//   message, data}), then an ordinary session/new
// Prints one JSON object to stdout: what the client saw. Diagnostics go to stderr.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, url, mode = "turn"] = process.argv.slice(2);
const req = createRequire(path.join(path.resolve(sdkDir), "_resolver.js"));
const load = (spec) => import(pathToFileURL(req.resolve(spec)).href);

const { client, methods } = await load("@agentclientprotocol/sdk/unstable");
const { createWebSocketStream } = await load("@agentclientprotocol/sdk/experimental/ws-client");

setTimeout(() => {
  process.stderr.write("ts_ws_client: timed out\n");
  process.exit(2);
}, 30000).unref();

const updates = [];
const app = client({ name: "acp-proxy-ws-interop" }).onNotification(
  methods.client.session.update,
  ({ params }) => {
    updates.push(params);
  },
);

const out = {};
await app.connectWith(createWebSocketStream(url), async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, subagents: {} },
    clientInfo: { name: "acp-proxy-ws-interop", version: "0.1.0" },
  });
  out.protocolVersion = init.protocolVersion;
  if (mode === "admission") {
    // a stdio MCP server from a remote client: the proxy refuses it
    try {
      await ctx.request(methods.agent.session.new, {
        cwd: "/",
        mcpServers: [{ name: "sh", command: "/bin/sh", args: ["-c", "id"], env: [] }],
      });
      out.refused = null;
    } catch (e) {
      out.refused = { code: e.code, message: e.message, data: e.data };
    }
    const ok = await ctx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    out.sessionId = ok.sessionId;
    return;
  }
  const sess = await ctx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  out.sessionId = sess.sessionId;
  if (mode === "hang") {
    try {
      await ctx.request(methods.agent.session.prompt, {
        sessionId: sess.sessionId,
        prompt: [{ type: "text", text: "hang" }],
      });
      out.hang = { answered: true };
    } catch (e) {
      out.hang = { code: e.code, message: e.message };
    }
    return;
  }
  const done = await ctx.request(methods.agent.session.prompt, {
    sessionId: sess.sessionId,
    prompt: [{ type: "text", text: "hello over WebSocket" }],
  });
  out.stopReason = done.stopReason;
  out.updates = updates.map((u) => [u.sessionId, u.update.sessionUpdate]);
  const announce = updates.find((u) => u.update.sessionUpdate === "subagent_update");
  out.child = announce?.update.sessionId ?? null;
  try {
    await ctx.request(methods.agent.session.prompt, {
      sessionId: out.child,
      prompt: [{ type: "text", text: "mutate the child" }],
    });
    out.childPrompt = { accepted: true };
  } catch (e) {
    out.childPrompt = { code: e.code, message: e.message };
  }
});
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
