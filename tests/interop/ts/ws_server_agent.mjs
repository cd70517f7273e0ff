#!/usr/bin/env node
// An ACP agent on the official TypeScript SDK (2.4.0), served over WebSocket by the
// SDK's own server transport (@agentclientprotocol/sdk/experimental/server's AcpServer
// with the Node adapter of experimental/node, on the `ws` package's upgrade handling).
//
// usage: ACP_TS_SDK_DIR=DIR node ws_server_agent.mjs
//   DIR's node_modules holds @agentclientprotocol/sdk, zod and ws.
// Prints "listening PORT" on stdout once serving ws://127.0.0.1:PORT/acp.
//
// Each connection gets its own agent: initialize (v1); session/new -> `ts-ws-N`;
// session/prompt "hang": one chunk, then the turn never ends (the test kills this
// process); any other prompt: two chunks, a subagent_update announcing `<session>-child`
// (no capabilities: nothing granted on it), one chunk on the child, end_turn.
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.ACP_TS_SDK_DIR;
if (!dir) throw new Error("ACP_TS_SDK_DIR is not set");
const req = createRequire(path.join(path.resolve(dir), "resolver.js"));
const load = (spec) => import(pathToFileURL(req.resolve(spec)).href);

const { agent, methods, PROTOCOL_VERSION } = await load("@agentclientprotocol/sdk/unstable");
const { AcpServer } = await load("@agentclientprotocol/sdk/experimental/server");
const { createNodeWebSocketUpgradeHandler } = await load("@agentclientprotocol/sdk/experimental/node");
const ws = await load("ws"); // CommonJS: its exports are the default export
const WebSocketServer = ws.WebSocketServer ?? ws.default.WebSocketServer ?? ws.default.Server;

const chunk = (text) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
let sessions = 0;

function createAgent() {
  const notify = (client, sessionId, update) =>
    client.notify(methods.client.session.update, { sessionId, update });
  return agent({ name: "ts-ws-server-agent" })
    .onRequest(methods.agent.initialize, ({ params }) => ({
      protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
      agentCapabilities: { loadSession: false },
      authMethods: [],
    }))
    .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-ws-${++sessions}` }))
    .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
      const sid = params.sessionId;
      const text = params.prompt.map((b) => b.text ?? "").join(" ");
      if (text === "hang") {
        await notify(client, sid, chunk("thinking..."));
        process.stderr.write("[ts-ws-server-agent] hanging\n");
        return new Promise(() => {});
      }
      await notify(client, sid, chunk("You said: "));
      await notify(client, sid, chunk(text));
      const child = `${sid}-child`;
      await notify(client, sid, {
        sessionUpdate: "subagent_update",
        sessionId: child,
        title: "Helper",
        state: { state: "running" },
      });
      await notify(client, child, chunk("child work"));
      return { stopReason: "end_turn" };
    });
}

const acp = new AcpServer({ createAgent });
const wss = new WebSocketServer({ noServer: true });
const upgrade = createNodeWebSocketUpgradeHandler(acp, wss);
const server = http.createServer((_req, res) => {
  res.writeHead(404);
  res.end();
});
server.on("upgrade", (request, socket, head) => {
  if (new URL(request.url, "http://x").pathname !== "/acp") return socket.destroy();
  upgrade(request, socket, head);
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
