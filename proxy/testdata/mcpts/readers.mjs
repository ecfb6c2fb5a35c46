// readers.mjs is a reference MCP server on the TypeScript SDK v2
// (@modelcontextprotocol/server) for toolgate's reader differential
// (proxy/adversarial/mcpreaders_test.go), over node:http on 127.0.0.1. It
// prints "listening <port>" once ready. Its tools, note and open_note,
// record the name and arguments they executed; GET /control/executed
// returns them (a JSON array) and forgets them.
import { createServer } from 'node:http';
import { createMcpHandler, McpServer, fromJsonSchema } from '@modelcontextprotocol/server';

let executed = [];

function buildServer() {
  const server = new McpServer({ name: 'readers-ts', version: '1.0.0' }, { capabilities: { tools: {} } });
  // The schema is open, as most servers' are: toolgate's own schema for
  // note is the one that limits text.
  for (const name of ['note', 'open_note']) {
    server.registerTool(name, {
      description: 'Keep a note',
      inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } } }),
    }, async (args) => {
      executed.push({ name, args: args ?? {} });
      return { content: [{ type: 'text', text: 'noted' }] };
    });
  }
  return server;
}

const handler = createMcpHandler(buildServer);

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

const srv = createServer(async (req, res) => {
  try {
    if (req.url === '/control/executed') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(executed));
      executed = [];
      return;
    }
    // As any node:http adapter must: a fetch Request cannot carry a body
    // on GET or HEAD, so such a body is dropped here.
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
