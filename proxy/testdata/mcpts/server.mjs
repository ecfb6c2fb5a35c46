// server.mjs is a reference MCP server on the TypeScript SDK v2
// (@modelcontextprotocol/server), serving protocol 2026-07-28 per request
// and 2025-era clients statelessly, over node:http on 127.0.0.1. It prints
// "listening <port>" once ready. Its tools count their invocations, which
// GET /control/counts reports, so tests can prove a refused call never ran.
//
//   create_issue  a nested schema that, like most servers', allows unknown fields
//   slow_report   sends progress, then waits for POST /control/release
//   confirm       MRTR: asks for a name (elicitation) with a requestState,
//                 and checks both came back untouched on the retry
//   flip_tools    enables the extra tool and publishes tools/list_changed
//   extra         disabled until flip_tools runs
//   file_ticket   create_issue's nested schema, with an outputSchema (its
//                 results carry structuredContent)
import { createServer } from 'node:http';
import { createMcpHandler, McpServer, fromJsonSchema, inputRequired, acceptedContent } from '@modelcontextprotocol/server';

const issueSchema = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1 },
    labels: { type: 'array', items: { type: 'string' } },
    assignee: {
      type: 'object',
      properties: {
        login: { type: 'string' },
        team: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } },
      },
      required: ['login'],
    },
  },
  required: ['title'],
};

const counts = { create_issue: 0, slow_report: 0, confirm: 0, confirm_done: 0, extra: 0, file_ticket: 0, requests: 0, badState: 0 };
let extraEnabled = false;
let release = null;
let released = new Promise(r => { release = r; });
let publish = () => {};

function buildServer() {
  const server = new McpServer({ name: 'issues-ts', version: '1.0.0' }, {
    capabilities: { tools: { listChanged: true } },
    cacheHints: { 'tools/list': { ttlMs: Number(process.env.TOOLS_TTL_MS ?? 60000), cacheScope: 'public' } },
  });
  server.registerTool('create_issue', {
    description: 'Create an issue',
    inputSchema: fromJsonSchema(issueSchema),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  }, async () => { counts.create_issue++; return { content: [{ type: 'text', text: 'created' }] }; });
  server.registerTool('file_ticket', {
    description: 'File a ticket; answers with its id',
    inputSchema: fromJsonSchema(issueSchema),
    outputSchema: fromJsonSchema({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }),
  }, async () => { counts.file_ticket++; return { content: [{ type: 'text', text: '{"id":"T-1"}' }], structuredContent: { id: 'T-1' } }; });
  // lookup_note answers with a secret and an e-mail address, in its text
  // and its structuredContent (built at run time, so that no file holds a
  // string a secret scanner would take for a key): for answer checks.
  server.registerTool('lookup_note', {
    description: 'Look up a note',
    inputSchema: fromJsonSchema({ type: 'object' }),
    outputSchema: fromJsonSchema({ type: 'object', properties: { owner: { type: 'string' }, key: { type: 'string' } }, required: ['owner'] }),
  }, async () => {
    const key = 'ghp' + '_' + 'aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5';
    const owner = 'ada.lovelace' + '@' + 'example.org';
    return { content: [{ type: 'text', text: `owner ${owner}, key ${key}` }], structuredContent: { owner, key } };
  });
  server.registerTool('slow_report', {
    description: 'A report that streams progress',
    inputSchema: fromJsonSchema({ type: 'object', properties: { pages: { type: 'integer' } } }),
  }, async (args, ctx) => {
    counts.slow_report++;
    const token = ctx.mcpReq._meta?.progressToken;
    if (token !== undefined) {
      await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2, message: 'page 1' } });
    }
    await released;
    return { content: [{ type: 'text', text: 'report done' }] };
  });
  server.registerTool('confirm', {
    description: 'Asks the user for a name first (MRTR)',
    inputSchema: fromJsonSchema({ type: 'object', properties: { ticket: { type: 'string' } }, required: ['ticket'] }),
  }, async (args, ctx) => {
    counts.confirm++;
    const form = acceptedContent(ctx.mcpReq.inputResponses, 'who');
    if (!form) {
      return inputRequired({
        inputRequests: { who: inputRequired.elicit({ message: 'Who confirms?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } }) },
        requestState: 'state:' + args.ticket + ':opaque/+=',
      });
    }
    if (ctx.mcpReq.requestState() !== 'state:' + args.ticket + ':opaque/+=') counts.badState++;
    counts.confirm_done++;
    return { content: [{ type: 'text', text: 'confirmed by ' + form.name }] };
  });
  const extra = server.registerTool('extra', {
    description: 'Enabled by flip_tools',
    inputSchema: fromJsonSchema({ type: 'object', properties: { note: { type: 'string' } } }),
  }, async () => { counts.extra++; return { content: [{ type: 'text', text: 'extra ran' }] }; });
  if (!extraEnabled) extra.disable();
  server.registerTool('flip_tools', { description: 'Enable extra and publish tools/list_changed' }, async () => {
    extraEnabled = true;
    extra.enable();
    publish();
    return { content: [{ type: 'text', text: 'flipped' }] };
  });
  return server;
}

const handler = createMcpHandler(buildServer);
publish = () => handler.notify.toolsChanged();

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

const srv = createServer(async (req, res) => {
  try {
    if (req.url.startsWith('/control/')) {
      if (req.url === '/control/release') { release(); released = new Promise(r => { release = r; }); res.end('ok'); return; }
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(counts));
      return;
    }
    counts.requests++;
    const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : await readBody(req);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    const request = new Request('http://' + req.headers.host + req.url, { method: req.method, headers, body, signal: ac.signal });
    const response = await handler.fetch(request);
    const out = {};
    response.headers.forEach((v, k) => { out[k] = v; });
    res.writeHead(response.status, out);
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (err) {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(err));
  }
});
srv.listen(0, '127.0.0.1', () => { console.log('listening ' + srv.address().port); });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
