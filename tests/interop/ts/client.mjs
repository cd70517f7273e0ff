#!/usr/bin/env node
// An ACP client on the official TypeScript SDK that reports what it observed.
//
// usage: node client.mjs [--subagents] -- AGENT_CMD [ARGS...]
//
// Spawns the agent command (the proxy, or the agent directly) and runs:
// initialize (v1) -> session/new -> prompt "hello there" (permissions answered
// allow_once) -> prompt "slow please" and session/cancel after three chunks.
// --subagents: the unstable entrypoint, clientCapabilities.subagents = {}; the
// cancel then names the child announced by subagent_update, and afterwards a
// session/prompt on the child is attempted (its outcome is reported).
// Prints one JSON object to stdout (shape: tests/interop/observe.py); exit 0 when
// the scenario ran to its end, 1 otherwise.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const log = (text) => rawLog("ts-client", text);
const argv = process.argv.slice(2);
const cut = argv.indexOf("--");
if (cut < 0 || cut === argv.length - 1) {
  log("usage: client.mjs [--subagents] -- AGENT_CMD...");
  process.exit(2);
}
const SUBAGENTS = argv.slice(0, cut).includes("--subagents");
const command = argv.slice(cut + 1);
const { client, methods, ndJsonStream } = await loadSdk(SUBAGENTS ? "/unstable" : "");

setTimeout(() => {
  log("FAIL: timed out");
  process.exit(1);
}, 30000).unref();

const received = [];
let changed = () => {};
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

const chunksOn = (sessionId, from) =>
  received
    .slice(from)
    .filter(
      (m) =>
        m.method === "session/update" &&
        m.params.sessionId === sessionId &&
        m.params.update.sessionUpdate === "agent_message_chunk",
    ).length;
const waitFor = (predicate) =>
  new Promise((resolve) => {
    const check = () => {
      if (predicate()) {
        changed = () => {};
        resolve();
      }
    };
    changed = check;
    check();
  });

const app = client({ name: "acp-proxy-ts-client" })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    const option = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(methods.client.session.update, () => {});

const out = { client: "ts" };
try {
  await app.connectWith({ readable, writable: wire.writable }, async (ctx) => {
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: {
        fs: { readTextFile: false, writeTextFile: false },
        terminal: false,
        ...(SUBAGENTS ? { subagents: {} } : {}),
      },
      clientInfo: { name: "acp-proxy-ts-client", version: "0.1.0" },
    });
    out.protocolVersion = init.protocolVersion;
    const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    out.sessionId = sessionId;
    const marks = [received.length];
    const stops = [];
    const prompt = (text) =>
      ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    stops.push((await prompt("hello there")).stopReason);
    marks.push(received.length);

    const announce = received.find((m) => m.params?.update?.sessionUpdate === "subagent_update");
    const target = SUBAGENTS ? announce?.params.update.sessionId : sessionId;
    if (!target) throw new Error("no child was announced");
    const slow = prompt("slow please");
    const from = received.length;
    await waitFor(() => chunksOn(target, from) >= 3);
    await ctx.notify(methods.agent.session.cancel, { sessionId: target });
    stops.push((await slow).stopReason);
    marks.push(received.length);
    out.stopReasons = stops;
    out.turns = marks.slice(1).map((end, i) => received.slice(marks[i], end));
    if (SUBAGENTS) {
      out.child = target;
      try {
        await ctx.request(methods.agent.session.prompt, {
          sessionId: target,
          prompt: [{ type: "text", text: "steer the child" }],
        });
        out.childPrompt = { accepted: true };
      } catch (e) {
        out.childPrompt = { code: e.code, message: e.message, data: e.data ?? null };
      }
    }
  });
} catch (e) {
  log(`FAIL: ${e?.stack ?? e}`);
  agentProc.kill();
  process.exit(1);
}
agentProc.stdin.end();
const code = await exited;
log(`agent exited with ${code}`);
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
