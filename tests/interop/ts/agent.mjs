#!/usr/bin/env node
// An ACP agent on the official TypeScript SDK, over stdio.
//
//   node agent.mjs               stable v1 entrypoint; same scenario as peers/py_sdk_agent.py
//   node agent.mjs --subagents   unstable entrypoint; when the client advertises
//                                clientCapabilities.subagents, each prompt runs on a child
//
// Plain prompt: 3 agent_message_chunk, tool_call, session/request_permission,
// tool_call_update in_progress + completed, a chunk, end_turn. "slow": a chunk every
// 20 ms until session/cancel, then cancelled.
// Subagent prompt: parent chunk; subagent_update announcing CHILD (title, description,
// capabilities {cancel: {}}, state running); child chunks, child tool_call; the parent
// mirrors requires_action around a permission request on CHILD, then running; child
// tool_call_update completed; mirror idle/end_turn; parent chunk; end_turn.
// Subagent "slow": mirror running, child ticks until session/cancel names CHILD, mirror
// idle/cancelled, parent chunk; the parent's turn ends end_turn.
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const SUBAGENTS = process.argv.includes("--subagents");
const NAME = SUBAGENTS ? "ts-subagent-agent" : "ts-agent";
const log = (text) => rawLog(NAME, text);
const { agent, methods, ndJsonStream, PROTOCOL_VERSION, RequestError } = await loadSdk(
  SUBAGENTS ? "/unstable" : "",
);

let clientHasSubagents = false;
const sessions = new Map(); // sessionId -> AbortController of its running turn, or null
const children = new Map(); // child sessionId -> AbortController of its running work, or null

const pause = (ms, signal) =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });
const chunk = (text) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } });
const notify = (client, sessionId, update) =>
  client.notify(methods.client.session.update, { sessionId, update });

async function ticks(client, sessionId, signal) {
  for (let i = 0; i < 500 && !signal.aborted; i++) {
    await notify(client, sessionId, chunk(`tick ${i} `));
    await pause(20, signal);
  }
  return signal.aborted ? "cancelled" : "end_turn";
}

async function toolCall(client, sessionId, text, around = {}) {
  const toolCallId = "call-1";
  await notify(client, sessionId, {
    sessionUpdate: "tool_call",
    toolCallId,
    title: "Echo",
    kind: "other",
    status: "pending",
  });
  await around.before?.();
  const answer = await client.request(methods.client.session.requestPermission, {
    sessionId,
    toolCall: { toolCallId, title: "Echo", status: "pending" },
    options: [
      { optionId: "yes", name: "Allow", kind: "allow_once" },
      { optionId: "no", name: "Reject", kind: "reject_once" },
    ],
  });
  await around.after?.();
  const allowed = answer.outcome.outcome === "selected" && answer.outcome.optionId === "yes";
  await notify(client, sessionId, { sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" });
  await notify(client, sessionId, {
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: allowed ? "completed" : "failed",
    content: [{ type: "content", content: { type: "text", text: allowed ? text : "rejected" } }],
  });
  return allowed;
}

async function plainTurn(client, sessionId, text, signal) {
  if (/slow/.test(text)) return ticks(client, sessionId, signal);
  for (const piece of ["You said: ", text, ". "]) await notify(client, sessionId, chunk(piece));
  const allowed = await toolCall(client, sessionId, text);
  await notify(client, sessionId, chunk(allowed ? "Done." : "Rejected."));
  return "end_turn";
}

async function subagentTurn(client, parentId, text) {
  const childId = `${parentId}/child-1`;
  const fresh = !children.has(childId);
  const work = new AbortController();
  children.set(childId, work);
  const mirror = (state) =>
    notify(client, parentId, { sessionUpdate: "subagent_update", sessionId: childId, state });
  await notify(client, parentId, chunk("Delegating. "));
  await notify(client, parentId, {
    sessionUpdate: "subagent_update",
    sessionId: childId,
    ...(fresh
      ? { title: "Helper", description: "Does the delegated work", capabilities: { cancel: {} } }
      : {}),
    state: { state: "running" },
  });
  let childStop;
  if (/slow/.test(text)) {
    childStop = await ticks(client, childId, work.signal);
  } else {
    await notify(client, childId, chunk("Working on: "));
    await notify(client, childId, chunk(text));
    await toolCall(client, childId, text, {
      before: () => mirror({ state: "requires_action" }),
      after: () => mirror({ state: "running" }),
    });
    childStop = "end_turn";
  }
  children.set(childId, null);
  await mirror({ state: "idle", stopReason: childStop });
  await notify(client, parentId, chunk(childStop === "cancelled" ? "Helper cancelled." : "Helper done."));
  return "end_turn";
}

const app = agent({ name: NAME })
  .onRequest(methods.agent.initialize, ({ params }) => {
    clientHasSubagents = SUBAGENTS && params.clientCapabilities?.subagents != null;
    log(`initialize v${params.protocolVersion} clientHasSubagents=${clientHasSubagents}`);
    return {
      protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
      agentCapabilities: { loadSession: false },
      agentInfo: { name: `acp-proxy-${NAME}`, version: "0.1.0" },
      authMethods: [],
    };
  })
  .onRequest(methods.agent.session.new, () => {
    const sessionId = `ts-session-${sessions.size + 1}`;
    sessions.set(sessionId, null);
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    if (!sessions.has(params.sessionId)) throw RequestError.resourceNotFound(params.sessionId);
    const turn = new AbortController();
    sessions.set(params.sessionId, turn);
    const text = params.prompt.map((b) => b.text ?? "").join(" ");
    try {
      const stopReason = clientHasSubagents
        ? await subagentTurn(client, params.sessionId, text)
        : await plainTurn(client, params.sessionId, text, turn.signal);
      return { stopReason };
    } finally {
      sessions.set(params.sessionId, null);
    }
  })
  .onNotification(methods.agent.session.cancel, ({ params }) => {
    log(`cancel ${params.sessionId}`);
    (sessions.get(params.sessionId) ?? children.get(params.sessionId))?.abort();
  });

const conn = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
process.exit(0);
