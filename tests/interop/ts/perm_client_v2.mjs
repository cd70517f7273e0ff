#!/usr/bin/env node
// An ACP v2 client on the official TypeScript SDK's draft-v2 entrypoint that
// answers permission requests with the allow_once option and reports them.
//
// usage: node perm_client_v2.mjs -- AGENT_CMD [ARGS...]
//
// initialize (v2), session/new, prompt "go", wait for the session's state_update
// idle. Prints {"protocolVersion", "sessionId", "permissions": [subject.toolCall.kind,
// ...], "methods": [method of every request or notification received, in order]}.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const log = (text) => rawLog("ts-v2-perm-client", text);
const argv = process.argv.slice(2);
const cut = argv.indexOf("--");
if (cut < 0 || cut === argv.length - 1) {
  log("usage: perm_client_v2.mjs -- AGENT_CMD...");
  process.exit(2);
}
const command = argv.slice(cut + 1);
const { client, methods, ndJsonStream } = await loadSdk("/experimental/v2/unstable");
setTimeout(() => {
  log("FAIL: timed out");
  process.exit(1);
}, 30000).unref();

const received = [];
let idle = null;
const agentProc = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agentProc.on("exit", (code) => resolve(code)));
const wire = ndJsonStream(Writable.toWeb(agentProc.stdin), Readable.toWeb(agentProc.stdout));
const readable = wire.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      if (message.method) received.push(message.method);
      if (message.params?.update?.sessionUpdate === "state_update" && message.params.update.state === "idle") idle?.();
      controller.enqueue(message);
    },
  }),
);
const permissions = [];
const app = client({ name: "acp-proxy-ts-v2-perm-client" })
  .onNotification(methods.client.session.update, () => {})
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissions.push(params.subject?.toolCall?.kind ?? null);
    const option = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  });

const out = {};
try {
  await app.connectWith({ readable, writable: wire.writable }, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: 2,
      info: { name: "acp-proxy-ts-v2-perm-client", version: "0.1.0" },
      capabilities: {},
    });
    out.protocolVersion = init.protocolVersion;
    const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: process.cwd() });
    out.sessionId = sessionId;
    const done = new Promise((resolve) => (idle = resolve));
    await ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "go" }] });
    await done;
  });
} catch (e) {
  log(`FAIL: ${e?.stack ?? e}`);
  agentProc.kill();
  process.exit(1);
}
agentProc.stdin.end();
await exited;
out.permissions = permissions;
out.methods = received;
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
