#!/usr/bin/env node
// An ACP v2 agent on the official TypeScript SDK's draft-v2 entrypoint
// (@agentclientprotocol/sdk/experimental/v2/unstable), over stdio, that delegates
// to one child session and logs every handler invocation.
//
// usage: node agent_v2.mjs --log FILE
//
// FILE gets one JSON line per handler invocation, written synchronously when the
// handler is entered: {"method", "sessionId", "step"} (step: a prompt's text,
// else the message's _meta["acp-proxy-test/step"], or null). It is how a test
// proves that a message never reached the agent.
//
// The agent is deliberately permissive: it accepts session/load (not a v2 method:
// a custom handler), session/resume, session/fork, session/prompt and
// session/cancel on any session it knows, the child included. Whatever is refused
// on the child through a proxy is refused by the proxy.
//
// Scenario (ordered by the wire; nothing waits for time to pass). Each prompt on
// PARENT is answered at acceptance ({messageId}); its turn then runs between the
// parent's state_update running and idle/end_turn.
// - prompt "delegate" on PARENT: a parent chunk, a subagent_update announcing
//   CHILD = PARENT/child-1 (title, description, capabilities {cancel: {}}, state
//   running), a child chunk.
// - session/cancel on CHILD while it runs: subagent_update idle/cancelled on the
//   parent. While it is idle, a cancel is only logged.
// - session/resume of PARENT: replays CHILD's announcement (capabilities and state
//   idle/cancelled: history), sends the parent's current state_update, then waits
//   for the client's `_acp-proxy-test/release` notification before answering {}.
// - prompt "rename" on PARENT: a subagent_update that patches only CHILD's title
//   (no capabilities).
// - prompt "continue" on PARENT (after the resume): CHILD is re-announced with its
//   complete capabilities {cancel: {}} and state running.
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const NAME = "ts-v2-agent";
const log = (text) => rawLog(NAME, text);
const argv = process.argv.slice(2);
const logAt = argv.indexOf("--log");
if (logAt < 0 || logAt === argv.length - 1) {
  log("usage: agent_v2.mjs --log FILE");
  process.exit(2);
}
const LOG_FILE = argv[logAt + 1];
const STEP = "acp-proxy-test/step";
const RELEASE = "_acp-proxy-test/release";

const { agent, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } = await loadSdk(
  "/experimental/v2/unstable",
);

const record = (method, params, step = params?._meta?.[STEP] ?? null) => {
  const entry = { method, sessionId: params?.sessionId ?? null, step };
  appendFileSync(LOG_FILE, JSON.stringify(entry) + "\n");
};

const sessions = new Set(); // every session id the agent knows (parents, children, forks)
const children = new Map(); // parent id -> child id
const running = new Set(); // children whose work runs
let released = null; // resolves the resume of a parent waiting for the client's release
let parents = 0;
let messages = 0;
const messageId = () => `msg-${++messages}`;

const chunk = (text) => ({
  sessionUpdate: "agent_message_chunk",
  messageId: messageId(),
  content: { type: "text", text },
});
const notify = (client, sessionId, update) =>
  client.notify(methods.client.session.update, { sessionId, update });
const announce = (childId, state) => ({
  sessionUpdate: "subagent_update",
  sessionId: childId,
  title: "Helper",
  description: "Does the delegated work",
  capabilities: { cancel: {} },
  state,
});
// A prompt's turn, after the prompt's response: a zero-delay timer runs once every
// pending microtask has run, and the SDK queues the response's write in microtasks.
// The SDK may enter a notification's handler a few microtasks after the handler of
// a request that followed it on the wire (its guards await more), never later than
// that: a turn's effects (the child running) start in the timer, so a session/cancel
// sent before the prompt never sees them.
const turn = (client, parentId, work) =>
  setTimeout(async () => {
    try {
      await notify(client, parentId, { sessionUpdate: "state_update", state: "running" });
      await work();
      await notify(client, parentId, { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" });
    } catch (e) {
      log(`FAIL in a turn: ${e?.stack ?? e}`);
    }
  }, 0);
const known = (sessionId) => {
  if (!sessions.has(sessionId)) throw RequestError.resourceNotFound(sessionId);
};

const app = agent({ name: NAME })
  .onRequest(methods.agent.initialize, ({ params }) => {
    record("initialize", null);
    return {
      protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
      info: { name: `acp-proxy-${NAME}`, version: "0.1.0" },
      capabilities: { session: { fork: {} } },
      authMethods: [],
    };
  })
  .onRequest(methods.agent.session.new, ({ params }) => {
    record("session/new", params);
    const sessionId = `ts-v2-session-${++parents}`;
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, ({ params, client }) => {
    const text = params.prompt.map((b) => b.text ?? "").join(" ");
    record("session/prompt", params, text);
    const parentId = params.sessionId;
    known(parentId);
    const childId = children.get(parentId);
    if (childId === undefined && /delegate/.test(text)) {
      const newChild = `${parentId}/child-1`;
      sessions.add(newChild);
      children.set(parentId, newChild);
      turn(client, parentId, async () => {
        running.add(newChild);
        await notify(client, parentId, chunk("Delegating. "));
        await notify(client, parentId, announce(newChild, { state: "running" }));
        await notify(client, newChild, chunk("Working. "));
      });
    } else if (childId !== undefined && /rename/.test(text)) {
      // A live patch without capabilities: not a re-announcement.
      turn(client, parentId, () =>
        notify(client, parentId, { sessionUpdate: "subagent_update", sessionId: childId, title: "Helper (resumed)" }),
      );
    } else if (childId !== undefined && /continue/.test(text)) {
      // The re-announcement after the resume: complete current capabilities.
      turn(client, parentId, () => {
        running.add(childId);
        return notify(client, parentId, announce(childId, { state: "running" }));
      });
    }
    // Any other prompt (the child's included) is accepted and does nothing.
    return { messageId: messageId() };
  })
  .onRequest(methods.agent.session.resume, async ({ params, client }) => {
    record("session/resume", params);
    const sessionId = params.sessionId;
    known(sessionId);
    const childId = children.get(sessionId);
    if (childId !== undefined) {
      // Replay before the response: history.
      await notify(client, sessionId, announce(childId, { state: "idle", stopReason: "cancelled" }));
      await notify(client, sessionId, { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" });
      await new Promise((resolve) => (released = resolve));
    } else {
      await notify(client, sessionId, { sessionUpdate: "state_update", state: "idle" });
    }
    return {};
  })
  .onRequest(methods.agent.session.fork, ({ params }) => {
    record("session/fork", params);
    known(params.sessionId);
    const sessionId = `${params.sessionId}/fork-1`;
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(
    "session/load",
    (params) => params,
    ({ params }) => {
      record("session/load", params);
      known(params?.sessionId);
      return {};
    },
  )
  .onRequest("*", ({ method, params }) => {
    record(method, params);
    throw RequestError.methodNotFound(method);
  })
  .onNotification(methods.agent.session.cancel, ({ params, client }) => {
    record("session/cancel", params);
    const childId = params.sessionId;
    if (!running.delete(childId)) return;
    const parentId = [...children].find(([, c]) => c === childId)?.[0];
    return notify(client, parentId, {
      sessionUpdate: "subagent_update",
      sessionId: childId,
      state: { state: "idle", stopReason: "cancelled" },
    });
  })
  .onNotification(
    RELEASE,
    (params) => params,
    ({ params }) => {
      record(RELEASE, params);
      released?.();
      released = null;
    },
  )
  .onNotification("*", ({ method, params }) => record(method, params));

const conn = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
process.exit(0);
