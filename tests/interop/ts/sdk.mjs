// Loads the official ACP TypeScript SDK (@agentclientprotocol/sdk) from the
// directory named by $ACP_TS_SDK_DIR (its node_modules holds the SDK and zod).
// Node's ESM resolution ignores NODE_PATH, hence the explicit resolver.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

export async function loadSdk(subpath = "") {
  const dir = process.env.ACP_TS_SDK_DIR;
  if (!dir) throw new Error("ACP_TS_SDK_DIR is not set");
  const require = createRequire(path.join(path.resolve(dir), "resolver.js"));
  return import(pathToFileURL(require.resolve("@agentclientprotocol/sdk" + subpath)).href);
}

export function log(name, text) {
  // stdout carries the protocol (agent) or the report (client): diagnostics go to stderr.
  process.stderr.write(`[${name}] ${text}\n`);
}
