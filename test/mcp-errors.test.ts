// How a failure talking MCP reads (src/mcp/open.ts): it says what happened, with the code README
// lists for it ("Exit codes of `mcp login`, `mcp tools` and `mcp call`").
import assert from "node:assert/strict";
import { test } from "node:test";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { connectionError } from "../src/mcp/open.ts";
import { exitCodeFor } from "../src/errors.ts";
import type { ConnectionConfig } from "../src/config/types.ts";

const connection = { id: "slow", url: "https://slow.example/mcp" } as ConnectionConfig;

test("a request the server never answered is a timeout (exit 1), not an error the server answered", () => {
  const error = connectionError(connection, new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout: 60000 }));
  assert.equal(error.code, "timeout");
  assert.equal(exitCodeFor(error), 1);
  assert.equal(error.message, "slow: https://slow.example gave no answer within 60s");
  // An error the server did answer stays one.
  const answered = connectionError(connection, new McpError(ErrorCode.InternalError, "boom"));
  assert.match(answered.message, /^slow: the server answered with an error \(MCP error -32603: boom\)$/);
});
