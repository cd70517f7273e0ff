#!/usr/bin/env node
// An ACP v2 agent on the official TypeScript SDK's draft-v2 entrypoint that asks
// the client for permission. Per session/prompt (answered at acceptance), in its
// turn: session/request_permission with a tool_call subject of kind "fetch", then
// "read", then "edit" (each offering "yes" allow_once and "no" reject_once), then
// state_update idle/end_turn. Each outcome goes to stderr as one line
// `[ts-v2-perm-agent] OUTCOME {"ask": KIND, "outcome": ...}`.
import { Readable, Writable } from "node:stream";
import { loadSdk, log as rawLog } from "./sdk.mjs";

const NAME = "ts-v2-perm-agent";
const log = (text) => rawLog(NAME, text);
const { agent, methods, ndJsonStream, PROTOCOL_VERSION } = await loadSdk(
  "/experimental/v2/unstable",
);
let sessions = 0;
let messages = 0;
const OPTIONS = [
  { optionId: "yes", name: "Allow", kind: "allow_once" },
  { optionId: "no", name: "Reject", kind: "reject_once" },
];

const turn = (client, sessionId) =>
  setTimeout(async () => {
    try {
      for (const kind of ["fetch", "read", "edit"]) {
        const answer = await client.request(methods.client.session.requestPermission, {
          sessionId,
          title: `May I ${kind}?`,
          subject: { type: "tool_call", toolCall: { toolCallId: `call-${kind}`, name: kind, kind } },
          options: OPTIONS,
        });
        log(`OUTCOME ${JSON.stringify({ ask: kind, outcome: answer.outcome })}`);
      }
      await client.notify(methods.client.session.update, {
        sessionId,
        update: { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" },
      });
    } catch (e) {
      log(`FAIL in a turn: ${e?.stack ?? e}`);
    }
  }, 0);

const app = agent({ name: NAME })
  .onRequest(methods.agent.initialize, ({ params }) => ({
    protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
    info: { name: `acp-proxy-${NAME}`, version: "0.1.0" },
    capabilities: {},
    authMethods: [],
  }))
  .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-v2-perm-${++sessions}` }))
  .onRequest(methods.agent.session.prompt, ({ params, client }) => {
    turn(client, params.sessionId);
    return { messageId: `msg-${++messages}` };
  });

const conn = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
process.exit(0);
