#!/usr/bin/env node
// An ACP v2 client on the official TypeScript SDK's draft-v2 entrypoint
// (@agentclientprotocol/sdk/experimental/v2/unstable) that drives agent_v2.mjs's
// child session and reports what it observed.
//
// usage: node client_v2.mjs -- AGENT_CMD [ARGS...]
//
// Spawns the agent command (the proxy, or the agent directly) and runs, waiting
// only for messages the scenario guarantees (never for time to pass):
//  1. initialize (protocol version 2), session/new -> PARENT;
//  2. prompt "delegate" on PARENT; wait for the parent's state_update idle; CHILD
//     is the session its subagent_update announced;
//  3. on CHILD: session/load, session/resume, session/fork, session/prompt (each
//     outcome is reported);
//  4. session/cancel on CHILD (step "granted"); wait for the parent's mirror of
//     CHILD idle/cancelled;
//  5. session/resume of PARENT; wait for the replay to end (the parent's
//     state_update); session/cancel on CHILD (step "during-replay"); then the
//     `_acp-proxy-test/release` notification that lets the agent answer;
//  6. after the response: session/cancel on CHILD (step "after-response"); prompt
//     "rename" on PARENT (the agent patches CHILD's title, without capabilities)
//     and wait for the parent's state_update idle; session/cancel on CHILD (step
//     "patched"); prompt "continue" on PARENT, the trigger of the re-announcement,
//     and wait for the parent's state_update idle;
//  7. session/cancel on CHILD (step "re-announced"); wait for the mirror of CHILD
//     idle/cancelled.
// Every session/cancel carries _meta {"acp-proxy-test/step": STEP}, which the
// agent logs. Prints one JSON object to stdout:
//   {"client": "ts-v2", "protocolVersion", "parent", "child",
//    "attempts": {method: {"result"} | {"code", "message", "data"}},
//    "timeline": [{"sent": LABEL} | {"received": RAW MESSAGE}, ...]}
// (timeline: every message received, raw and in wire order, taken from the SDK's
// stream before dispatch, between markers of what the client sent).
// Exit 0 when the scenario ran to its end, 1 otherwise.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const log = (text) => rawLog("ts-v2-client", text);
const argv = process.argv.slice(2);
const cut = argv.indexOf("--");
if (cut < 0 || cut === argv.length - 1) {
  log("usage: client_v2.mjs -- AGENT_CMD...");
  process.exit(2);
}
const command = argv.slice(cut + 1);
const { client, methods, ndJsonStream } = await loadSdk("/experimental/v2/unstable");
const STEP = "acp-proxy-test/step";
const RELEASE = "_acp-proxy-test/release";

setTimeout(() => {
  log("FAIL: timed out");
  process.exit(1);
}, 30000).unref();

const timeline = [];
const received = [];
const waiters = new Set();
const agentProc = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agentProc.on("exit", (code) => resolve(code)));
const wire = ndJsonStream(Writable.toWeb(agentProc.stdin), Readable.toWeb(agentProc.stdout));
const readable = wire.readable.pipeThrough(
  new TransformStream({
    transform(message, controller) {
      received.push(message);
      timeline.push({ received: message });
      controller.enqueue(message);
      for (const check of [...waiters]) check();
    },
  }),
);

// Resolves once a message received at or after index `from` satisfies `predicate`.
const waitFor = (from, predicate) =>
  new Promise((resolve) => {
    const check = () => {
      if (received.slice(from).some(predicate)) {
        waiters.delete(check);
        resolve();
      }
    };
    waiters.add(check);
    check();
  });
const update = (m) => (m.method === "session/update" ? m.params.update : null);
const stateOf = (sessionId, state, stopReason) => (m) =>
  update(m)?.sessionUpdate === "state_update" &&
  m.params.sessionId === sessionId &&
  update(m).state === state &&
  (stopReason === undefined || update(m).stopReason === stopReason);
const mirrorOf = (parent, child, state, stopReason) => (m) =>
  update(m)?.sessionUpdate === "subagent_update" &&
  m.params.sessionId === parent &&
  update(m).sessionId === child &&
  update(m).state?.state === state &&
  update(m).state?.stopReason === stopReason;

const app = client({ name: "acp-proxy-ts-v2-client" }).onNotification(
  methods.client.session.update,
  () => {},
);

const out = { client: "ts-v2" };
try {
  await app.connectWith({ readable, writable: wire.writable }, async (ctx) => {
    const send = (label) => timeline.push({ sent: label });
    const request = (label, method, params) => (send(label), ctx.request(method, params));
    const notify = (label, method, params) => (send(label), ctx.notify(method, params));

    const init = await request("initialize", methods.agent.initialize, {
      protocolVersion: 2,
      info: { name: "acp-proxy-ts-v2-client", version: "0.1.0" },
      capabilities: {},
    });
    out.protocolVersion = init.protocolVersion;
    const cwd = process.cwd();
    const { sessionId: parent } = await request("session/new", methods.agent.session.new, { cwd });
    out.parent = parent;

    // A v2 prompt is answered at acceptance; its turn ends with state_update idle.
    const promptParent = async (text) => {
      const from = received.length;
      await request(`session/prompt parent ${text}`, methods.agent.session.prompt, {
        sessionId: parent,
        prompt: [{ type: "text", text }],
      });
      await waitFor(from, stateOf(parent, "idle", "end_turn"));
    };
    await promptParent("delegate");
    const announcement = received.find((m) => update(m)?.sessionUpdate === "subagent_update");
    const child = announcement?.params.update.sessionId;
    if (!child) throw new Error("no child was announced");
    out.child = child;

    out.attempts = {};
    const attempts = [
      ["session/load", { sessionId: child, cwd, mcpServers: [] }],
      ["session/resume", { sessionId: child, cwd }],
      ["session/fork", { sessionId: child, cwd }],
      ["session/prompt", { sessionId: child, prompt: [{ type: "text", text: "steer the child" }] }],
    ];
    for (const [method, params] of attempts) {
      try {
        out.attempts[method] = { result: await request(`${method} child`, method, params) };
      } catch (e) {
        out.attempts[method] = { code: e.code, message: e.message, data: e.data ?? null };
      }
    }

    const cancelChild = (step) =>
      notify(`session/cancel child ${step}`, methods.agent.session.cancel, {
        sessionId: child,
        _meta: { [STEP]: step },
      });
    let mark = received.length;
    await cancelChild("granted");
    await waitFor(mark, mirrorOf(parent, child, "idle", "cancelled"));

    mark = received.length;
    const resumed = request("session/resume parent", methods.agent.session.resume, {
      sessionId: parent,
      cwd,
    });
    await waitFor(mark, stateOf(parent, "idle"));
    await cancelChild("during-replay");
    await notify("release", RELEASE, {});
    await resumed;

    await cancelChild("after-response");
    await promptParent("rename");
    await cancelChild("patched");
    await promptParent("continue");

    mark = received.length;
    await cancelChild("re-announced");
    await waitFor(mark, mirrorOf(parent, child, "idle", "cancelled"));
  });
} catch (e) {
  log(`FAIL: ${e?.stack ?? e}`);
  agentProc.kill();
  process.exit(1);
}
agentProc.stdin.end();
const code = await exited;
log(`agent exited with ${code}`);
out.timeline = timeline;
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
