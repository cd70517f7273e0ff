#!/usr/bin/env node
// An ACP client on the official TypeScript SDK that drives acp-proxy's demo agent
// (python -m acp_proxy.demo.agent) and reports what it received and what the SDK
// made of it.
//
// usage: node demo_client.mjs --version 1|2 [--subagents] -- AGENT_CMD [ARGS...]
//
// Entrypoints: --version 1 the stable one (@agentclientprotocol/sdk), with
// --subagents the unstable one (/unstable, clientCapabilities.subagents = {});
// --version 2 the draft-v2 one (/experimental/v2/unstable).
// Scenario, waiting only for messages the agent must send (never for time):
//  1. initialize, session/new -> PARENT;
//  2. prompt "Find the session/new docs and review my patch." (v1: until its
//     stopReason; v2: its answer, then the parent's state_update idle);
//  3. when a child was announced with capabilities.cancel: session/cancel on it,
//     then wait for the parent's mirror of it idle/cancelled;
//  4. prompt "Use your tools." (every permission request answered with its
//     allow_once option; v1: until its stopReason; v2: its answer, then until
//     every permission request received has reached the handler);
//  5. session/resume of PARENT; prompt "Carry on." (as in 2).
// The SDK's own console.error reports (a message it could not parse) are captured.
// Prints one JSON object to stdout:
//   {"client": "ts", "version", "subagents", "initialize": RESULT, "parent",
//    "stopReasons": [...], "received": [RAW MESSAGE, ...],
//    "handled": {"updates": [{"sessionId", "sessionUpdate"}], "permissions": [PARAMS]},
//    "sdkErrors": [TEXT, ...]}
// (received: every message from the agent, raw and in wire order, taken from the
// SDK's stream before dispatch; handled: what reached this client's handlers.)
// Exit 0 when the scenario ran to its end, 1 otherwise.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const log = (text) => rawLog("ts-demo-client", text);
const argv = process.argv.slice(2);
const cut = argv.indexOf("--");
const flags = cut < 0 ? [] : argv.slice(0, cut);
const VERSION = Number(flags[flags.indexOf("--version") + 1]);
const SUBAGENTS = flags.includes("--subagents");
if (cut < 0 || cut === argv.length - 1 || ![1, 2].includes(VERSION)) {
  log("usage: demo_client.mjs --version 1|2 [--subagents] -- AGENT_CMD...");
  process.exit(2);
}
const command = argv.slice(cut + 1);
const entry = VERSION === 2 ? "/experimental/v2/unstable" : SUBAGENTS ? "/unstable" : "";
const { client, methods, ndJsonStream } = await loadSdk(entry);

const sdkErrors = [];
const consoleError = console.error;
console.error = (...args) => {
  sdkErrors.push(format(...args));
  consoleError(...args);
};

setTimeout(() => {
  log("FAIL: timed out");
  process.exit(1);
}, 30000).unref();

const received = [];
const handled = { updates: [], permissions: [] };
const waiters = new Set();
const changed = () => {
  for (const check of [...waiters]) check();
};
const agentProc = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agentProc.on("exit", (code) => resolve(code)));
const wire = ndJsonStream(Writable.toWeb(agentProc.stdin), Readable.toWeb(agentProc.stdout));
const readable = wire.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      received.push(message);
      controller.enqueue(message);
      changed();
    },
  }),
);

// Resolves once `predicate()` holds (checked now and after every message or handler call).
const waitUntil = (predicate) =>
  new Promise((resolve) => {
    const check = () => {
      if (predicate()) {
        waiters.delete(check);
        resolve();
      }
    };
    waiters.add(check);
    check();
  });
const update = (m) => (m.method === "session/update" ? m.params.update : null);
const since = (from, predicate) => () => received.slice(from).some(predicate);

const app = client({ name: "acp-proxy-ts-demo-client" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    handled.permissions.push(params);
    setImmediate(changed);
    const option = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    handled.updates.push({
      sessionId: params.sessionId,
      sessionUpdate: params.update.sessionUpdate,
    });
    setImmediate(changed);
  });

const out = { client: "ts", version: VERSION, subagents: SUBAGENTS };
try {
  await app.connectWith({ readable, writable: wire.writable }, async (ctx) => {
    const init =
      VERSION === 2
        ? await ctx.request(methods.agent.initialize, {
            protocolVersion: 2,
            info: { name: "acp-proxy-ts-demo-client", version: "0.1.0" },
            capabilities: {},
          })
        : await ctx.request(methods.agent.initialize, {
            protocolVersion: 1,
            clientCapabilities: {
              fs: { readTextFile: false, writeTextFile: false },
              terminal: false,
              ...(SUBAGENTS ? { subagents: {} } : {}),
            },
            clientInfo: { name: "acp-proxy-ts-demo-client", version: "0.1.0" },
          });
    out.initialize = init;
    const cwd = process.cwd();
    const { sessionId: parent } = await ctx.request(methods.agent.session.new, {
      cwd,
      mcpServers: [],
    });
    out.parent = parent;
    const idle = (m) =>
      update(m)?.sessionUpdate === "state_update" &&
      m.params.sessionId === parent &&
      update(m).state === "idle";
    const stops = [];
    const prompt = async (text) => {
      const from = received.length;
      const answer = await ctx.request(methods.agent.session.prompt, {
        sessionId: parent,
        prompt: [{ type: "text", text }],
      });
      stops.push(answer.stopReason ?? null);
      return from;
    };

    let from = await prompt("Find the session/new docs and review my patch.");
    if (VERSION === 2) await waitUntil(since(from, idle));
    const cancellable = received.find(
      (m) => update(m)?.sessionUpdate === "subagent_update" && update(m).capabilities?.cancel,
    );
    if (cancellable) {
      const child = update(cancellable).sessionId;
      out.child = child;
      from = received.length;
      await ctx.notify(methods.agent.session.cancel, { sessionId: child });
      await waitUntil(
        since(
          from,
          (m) =>
            update(m)?.sessionUpdate === "subagent_update" &&
            m.params.sessionId === parent &&
            update(m).sessionId === child &&
            update(m).state?.stopReason === "cancelled",
        ),
      );
    }

    await prompt("Use your tools.");
    if (VERSION === 2) {
      const asked = () => received.filter((m) => m.method === "session/request_permission").length;
      await waitUntil(() => asked() > 0 && handled.permissions.length === asked());
    }

    await ctx.request(methods.agent.session.resume, { sessionId: parent, cwd, mcpServers: [] });
    from = await prompt("Carry on.");
    if (VERSION === 2) await waitUntil(since(from, idle));
    out.stopReasons = stops;
  });
} catch (e) {
  log(`FAIL: ${e?.stack ?? e}`);
  agentProc.kill();
  process.exit(1);
}
agentProc.stdin.end();
const code = await exited;
log(`agent exited with ${code}`);
// Every notification received has been dispatched by now (the stream is drained).
Object.assign(out, { received, handled, sdkErrors });
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
