// clients.mjs drives one mainstream MCP client against an MCP endpoint and
// prints, one JSON line per call, what the client RETURNED TO ITS CALLER
// (or the exception it raised instead), for the Go test to check:
//
//   node clients.mjs CLIENT ENDPOINT CALLS_JSON
//
// CLIENT is one of
//   v1         the TypeScript SDK v1 client (@modelcontextprotocol/sdk Client.callTool)
//   v2         the TypeScript SDK v2 client (@modelcontextprotocol/client Client.callTool)
//   inspector  the MCP Inspector CLI (@modelcontextprotocol/inspector-cli), run as a
//              process: its caller reads its stdout (the result JSON) and exit status
//   aisdk      the AI SDK's MCP client (@ai-sdk/mcp createMCPClient): the tool's
//              execute() result, and the text toModelOutput gives the model
//   v1task     the TypeScript SDK v1 client's task API (2025-11-25 tasks:
//              client.experimental.tasks.callToolStream, then getTask and
//              getTaskResult when the task failed)
//
// CALLS_JSON is [{"name": "...", "tool": "...", "args": {...}}, ...]. Each
// line is {"name", "returned": bool, "isError": bool, "text": "...",
// "structured": bool, "error": "..."}, and for v1task "taskStatus",
// "statusMessage" and "streamError".
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const [kind, endpoint, callsJSON] = process.argv.slice(2);
const calls = JSON.parse(callsJSON);
const out = o => console.log(JSON.stringify(o));
const text = r => (r?.content ?? []).filter(c => c.type === 'text').map(c => c.text).join('');
const report = (name, r) => out({
  name, returned: true, isError: !!r.isError, text: text(r), structured: r.structuredContent !== undefined,
  taskStatus: r.taskStatus, statusMessage: r.statusMessage, streamError: r.streamError,
});
const failed = (name, e) => out({ name, returned: false, error: String(e?.message ?? e) });

async function withClient(connect, call) {
  const c = await connect();
  for (const k of calls) {
    try { report(k.name, await call(c, k)); } catch (e) { failed(k.name, e); }
  }
  await c.close();
}

switch (kind) {
  case 'v1':
  case 'v1task': {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    await withClient(async () => {
      const c = new Client({ name: 'agent-v1', version: '1.0.0' });
      await c.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
      await c.listTools(); // as agents do: the list gives the model its tools (and the client its output validators)
      return c;
    }, async (c, k) => {
      if (kind === 'v1') return c.callTool({ name: k.tool, arguments: k.args });
      // The task API: the stream's messages, then, for a task that
      // failed (the stream then ends with "Task <id> failed" and nothing
      // more), what tasks/get and tasks/result give the caller.
      let created, last;
      for await (const m of c.experimental.tasks.callToolStream({ name: k.tool, arguments: k.args }, undefined, { task: { ttl: 60000 } })) {
        if (m.type === 'taskCreated') created = m.task;
        last = m;
      }
      if (last?.type === 'result') return { ...last.result, taskStatus: 'completed' };
      if (!created) throw new Error(`task stream ended with ${last?.type}: ${last?.error?.message ?? JSON.stringify(last)}`);
      const task = await c.experimental.tasks.getTask(created.taskId);
      const { CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
      const result = await c.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
      return { ...result, taskStatus: task.status, statusMessage: task.statusMessage, streamError: last?.error?.message };
    });
    break;
  }
  case 'v2': {
    const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
    await withClient(async () => {
      const c = new Client({ name: 'agent-v2', version: '2.0.0' }, { versionNegotiation: { mode: 'auto' } });
      await c.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
      await c.listTools();
      return c;
    }, (c, k) => c.callTool({ name: k.tool, arguments: k.args }));
    break;
  }
  case 'aisdk': {
    const { createMCPClient } = await import('@ai-sdk/mcp');
    let tools;
    await withClient(async () => {
      const c = await createMCPClient({ transport: { type: 'http', url: endpoint } });
      tools = await c.tools();
      return c;
    }, async (c, k) => {
      const t = tools[k.tool];
      const r = await t.execute(k.args, { toolCallId: k.name, messages: [] });
      // What the model is shown: toModelOutput's text parts.
      const mo = await t.toModelOutput({ toolCallId: k.name, input: k.args, output: r });
      const shown = mo.type === 'content' ? mo.value.filter(p => p.type === 'text').map(p => p.text).join('') : JSON.stringify(mo.value);
      return { ...r, content: [{ type: 'text', text: shown }] };
    });
    break;
  }
  case 'inspector': {
    const require = createRequire(import.meta.url);
    const cli = path.join(path.dirname(require.resolve('@modelcontextprotocol/inspector-cli/package.json')), 'build', 'index.js');
    for (const k of calls) {
      const args = [cli, endpoint, '--transport', 'http', '--method', 'tools/call', '--tool-name', k.tool];
      for (const [key, v] of Object.entries(k.args)) args.push('--tool-arg', `${key}=${JSON.stringify(v)}`);
      // The CLI finds its own package.json by a path relative to the working
      // directory ("../package.json", else "../../package.json"): run it from
      // its build folder, as from a checkout of the inspector.
      const p = spawnSync(process.execPath, args, { cwd: path.dirname(cli), encoding: 'utf8', timeout: 60000 });
      if (p.status !== 0) { failed(k.name, (p.stderr || p.stdout).trim().split('\n').slice(-3).join(' ')); continue; }
      try { report(k.name, JSON.parse(p.stdout)); } catch (e) { failed(k.name, 'stdout is not JSON: ' + p.stdout.slice(0, 200)); }
    }
    break;
  }
  default:
    throw new Error('unknown client ' + kind);
}
